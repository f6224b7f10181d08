package tools

import (
	"context"
	"slices"
	"strings"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// Handler runs a tool. args have been validated against the tool's
// parameter schema (defaults applied, values converted to string, int,
// float64, bool, []any or map[string]any). tc is never nil. A handler
// returns a *bub.Error to report a failure with its own kind and details;
// any other error becomes a tool error in [Invoke].
type Handler func(ctx context.Context, tc *Context, args map[string]any) (any, error)

// Tool is one callable unit (Bub's Tool).
type Tool struct {
	// Name is the runtime name, e.g. "fs.read"; the model sees [Tool.ModelName].
	Name string
	// Description is shown to the model and in the tools prompt.
	Description string
	// Parameters is the JSON schema of the arguments: an object schema
	// whose properties use the subset [Validate] understands. Nil means
	// no parameters. It must not be modified after registration.
	Parameters map[string]any
	// Order lists property names in signature order: the order of the
	// tools prompt and of positional comma-command arguments. Properties
	// it omits follow: required ones in "required" order, then the rest
	// by name.
	Order []string
	// Hidden tools (Bub's agent_use=false) are never offered to the model;
	// they run as comma commands only.
	Hidden bool
	// RequiresContext makes [Invoke] refuse a call without a [Context]
	// (Bub's context=true).
	RequiresContext bool
	// Effect is the tool's effect class (see [Effect]); empty means
	// [EffectIrreversible]. [Registry.Register] refuses any other value
	// than the three classes.
	Effect Effect
	// Handler runs the tool.
	Handler Handler
}

// ModelName returns the model-facing name: Name with "." replaced by "_".
func (t Tool) ModelName() string { return ModelName(t.Name) }

// ModelName returns the model-facing form of a runtime tool name.
func ModelName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// Schema returns the tool as the model sees it.
func (t Tool) Schema() llm.ToolSchema {
	params := t.Parameters
	if params == nil {
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return llm.ToolSchema{Name: t.ModelName(), Description: t.Description, Parameters: params}
}

// ParamNames returns the tool's parameter names in signature order (see
// [Tool.Order]).
func (t Tool) ParamNames() []string {
	props := properties(t.Parameters)
	names := make([]string, 0, len(props))
	seen := make(map[string]bool, len(props))
	add := func(name string) {
		if _, ok := props[name]; ok && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, name := range t.Order {
		add(name)
	}
	for _, name := range requiredNames(t.Parameters) {
		add(name)
	}
	rest := make([]string, 0, len(props))
	for name := range props {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

// Context is what a tool handler gets besides its arguments (Bub's
// ToolContext). The agent loop fills it per call; fields may be added.
type Context struct {
	// RunID correlates the call with the tape entries of its run (comma
	// commands included: they are runs of their own).
	RunID string
	// SessionID is the session of the turn; empty means the session_id
	// key of State.
	SessionID string
	// State is the turn state shared with hooks; it may be nil.
	State *bub.State
	// Workspace is the directory file tools are confined to; empty means
	// State's workspace.
	Workspace string
	// Tape is the session tape; nil when the call has none.
	Tape Tape
	// Spawner runs subagents; nil when the call cannot.
	Spawner Spawner
}

// WorkspaceDir returns Workspace, else the state's workspace, else "".
func (c *Context) WorkspaceDir() string {
	switch {
	case c == nil:
		return ""
	case c.Workspace != "":
		return c.Workspace
	case c.State != nil:
		return c.State.Workspace()
	}
	return ""
}

// Session returns SessionID, else the state's session_id, else "".
func (c *Context) Session() string {
	switch {
	case c == nil:
		return ""
	case c.SessionID != "":
		return c.SessionID
	case c.State != nil:
		return c.State.String(bub.StateSessionID)
	}
	return ""
}

// Schemas returns the model-facing schemas of the agent-usable tools in ts,
// in the order given.
func Schemas(ts []Tool) []llm.ToolSchema {
	out := make([]llm.ToolSchema, 0, len(ts))
	for _, t := range ts {
		if !t.Hidden {
			out = append(out, t.Schema())
		}
	}
	return out
}

// RenderPrompt renders the agent-usable tools in ts as Bub's tools block:
//
//	<available_tools>
//	- fs_read(path, offset?, limit?): Read a text file ...
//	</available_tools>
//
// Optional parameters carry "?", a tool without parameters renders "()",
// and the ": description" part is left out when the description is empty.
// With no agent-usable tool it returns "".
func RenderPrompt(ts []Tool) string {
	var lines []string
	for _, t := range ts {
		if t.Hidden {
			continue
		}
		required := requiredNames(t.Parameters)
		params := t.ParamNames()
		for i, name := range params {
			if !slices.Contains(required, name) {
				params[i] = name + "?"
			}
		}
		line := "- " + t.ModelName() + "(" + strings.Join(params, ", ") + ")"
		if t.Description != "" {
			line += ": " + t.Description
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return ""
	}
	return "<available_tools>\n" + strings.Join(lines, "\n") + "\n</available_tools>"
}
