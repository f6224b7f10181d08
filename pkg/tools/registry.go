package tools

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/bubbus/bub/pkg/llm"
)

// Registration errors; Register wraps them with the tool's name.
var (
	// ErrDuplicateTool reports a runtime or model-facing name that is
	// already registered.
	ErrDuplicateTool = errors.New("tool already registered")
	// ErrInvalidTool reports a tool whose name, handler or schema is unusable.
	ErrInvalidTool = errors.New("invalid tool")
	// ErrRegistryFrozen reports a registration after [Registry.Freeze].
	ErrRegistryFrozen = errors.New("tool registry is frozen")
)

// validName is what a runtime name may look like: its model-facing form
// must satisfy the OpenAI function-name rule ^[a-zA-Z0-9_-]{1,64}$.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Registry holds tools keyed by runtime name. The zero value is an empty
// registry ready for use; it is safe for concurrent use. Registries are
// values: each worker builds its own.
type Registry struct {
	mu     sync.RWMutex
	tools  map[string]Tool   // by runtime name
	models map[string]string // model-facing name → runtime name
	frozen bool
	// Set by Freeze: the agent-usable tools sorted by runtime name, their
	// schemas and their available-tools block (see Usable, Schemas and
	// Prompt).
	usable  []Tool
	schemas []llm.ToolSchema
	prompt  string
}

// Register adds t. It fails when the name is malformed, the handler is
// missing, the schema is not an object schema of the supported subset, the
// runtime or model-facing name is taken, or the registry is frozen.
func (r *Registry) Register(t Tool) error {
	if err := check(t); err != nil {
		return fmt.Errorf("register tool %q: %w", t.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return fmt.Errorf("register tool %q: %w", t.Name, ErrRegistryFrozen)
	}
	if _, ok := r.tools[t.Name]; ok {
		return fmt.Errorf("register tool %q: %w", t.Name, ErrDuplicateTool)
	}
	if other, ok := r.models[t.ModelName()]; ok {
		return fmt.Errorf("register tool %q: model name %q is used by %q: %w", t.Name, t.ModelName(), other, ErrDuplicateTool)
	}
	if r.tools == nil {
		r.tools = map[string]Tool{}
		r.models = map[string]string{}
	}
	r.tools[t.Name] = t
	r.models[t.ModelName()] = t.Name
	return nil
}

// MustRegister registers every tool and panics on the first error. Use it
// only for static wiring.
func (r *Registry) MustRegister(ts ...Tool) {
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			panic(err)
		}
	}
}

// Freeze makes every later Register fail with [ErrRegistryFrozen]; a
// service freezes its registry once it starts serving.
func (r *Registry) Freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return
	}
	r.frozen = true
	r.usable = usable(r.sorted())
	r.schemas = Schemas(r.usable)
	for i, s := range r.schemas {
		r.schemas[i] = s.Encoded() // offered on every model call
	}
	r.prompt = RenderPrompt(r.usable)
}

// usable keeps the tools of ts that are not Hidden, in place.
func usable(ts []Tool) []Tool { return slices.DeleteFunc(ts, func(t Tool) bool { return t.Hidden }) }

// Usable returns the agent-usable tools (not Hidden) sorted by runtime
// name: what a step offers unless its run limits the tools. A frozen
// registry returns the list it made when it froze, shared by every
// caller, who must not modify its elements.
func (r *Registry) Usable() []Tool {
	r.mu.RLock()
	frozen, ts := r.frozen, r.usable
	r.mu.RUnlock()
	if frozen {
		return ts[:len(ts):len(ts)]
	}
	return usable(r.All())
}

// frozenFor reports whether r is frozen and ts are its agent-usable tools
// (the usual offer of a step), whose schemas and prompt it made already.
func (r *Registry) frozenFor(ts []Tool) (ok bool, schemas []llm.ToolSchema, prompt string) {
	r.mu.RLock()
	frozen, ust, schemas, prompt := r.frozen, r.usable, r.schemas, r.prompt
	r.mu.RUnlock()
	if !frozen || !slices.EqualFunc(ts, ust, func(a, b Tool) bool { return a.Name == b.Name }) {
		return false, nil, ""
	}
	return true, schemas, prompt
}

// Prompt is [RenderPrompt] of ts. A frozen registry rendered the block of
// all its agent-usable tools when it froze, and answers with it when ts are
// those tools, without rendering it again.
func (r *Registry) Prompt(ts []Tool) string {
	if ok, _, prompt := r.frozenFor(ts); ok {
		return prompt
	}
	return RenderPrompt(ts)
}

// Schemas is [Schemas] of ts. A frozen registry made the schemas of all
// its agent-usable tools when it froze, and answers with them when ts are
// those tools: shared by every caller, who must not modify them.
func (r *Registry) Schemas(ts []Tool) []llm.ToolSchema {
	if ok, schemas, _ := r.frozenFor(ts); ok {
		return schemas[:len(schemas):len(schemas)]
	}
	return Schemas(ts)
}

// Get returns the tool with the runtime name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Lookup returns the agent-usable tool with the model-facing name (e.g.
// "fs_read"), as a model's tool call names it. Hidden tools are never
// found: the model cannot call them.
func (r *Registry) Lookup(modelName string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[r.models[modelName]]
	if !ok || t.Hidden {
		return Tool{}, false
	}
	return t, true
}

// All returns every tool sorted by runtime name.
func (r *Registry) All() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sorted()
}

// sorted returns every tool sorted by runtime name; r.mu is held.
func (r *Registry) sorted() []Tool {
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Select returns the tools with the runtime names (as [Registry.ResolveNames]
// returns them), sorted by runtime name; unknown names are skipped.
func (r *Registry) Select(names []string) []Tool {
	out := make([]Tool, 0, len(names))
	for _, t := range r.All() {
		if slices.Contains(names, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// ModelNames returns the model-facing names of the agent-usable tools,
// sorted: the names the model may call.
func (r *Registry) ModelNames() []string {
	var out []string
	for _, t := range r.All() {
		if !t.Hidden {
			out = append(out, t.ModelName())
		}
	}
	return out
}

// Guidance is Bub's builtin before_tool_call for unknown tools: for a
// model-facing name of an agent-usable tool it returns false (no
// opinion); for any other name it returns [UnknownToolGuidance] against
// all agent-usable tools and true (replace the call with the guidance).
func (r *Registry) Guidance(modelName string) (string, bool) {
	known := r.ModelNames()
	if slices.Contains(known, modelName) {
		return "", false
	}
	return UnknownToolGuidance(modelName, known, slices.Contains(known, "skill")), true
}

// ModelSchemas returns the schemas of the agent-usable tools sorted by
// runtime name.
func (r *Registry) ModelSchemas() []llm.ToolSchema { return Schemas(r.All()) }

// ResolveName resolves a user- or model-provided name to a runtime name:
// trimmed and case-insensitive, matching runtime names and model-facing
// aliases, runtime names first (Bub's resolve_tool_name).
func (r *Registry) ResolveName(name string) (string, bool) {
	key := strings.ToLower(strings.TrimSpace(name))
	if key == "" {
		return "", false
	}
	alias := ""
	for _, t := range r.All() {
		if strings.ToLower(t.Name) == key {
			return t.Name, true
		}
		if alias == "" && strings.ToLower(t.ModelName()) == key {
			alias = t.Name
		}
	}
	return alias, alias != ""
}

// ResolveNames resolves names and exclude with [Registry.ResolveName] and
// returns the sorted runtime names of names minus exclude (Bub's
// resolve_tool_names). Nil names means every registered tool; an empty
// non-nil slice means none. Unknown names in either list yield an
// *[UnknownToolsError].
func (r *Registry) ResolveNames(names, exclude []string) ([]string, error) {
	excluded, err := r.resolveAll(exclude)
	if err != nil {
		return nil, err
	}
	var resolved []string
	if names == nil {
		for _, t := range r.All() {
			resolved = append(resolved, t.Name)
		}
	} else if resolved, err = r.resolveAll(names); err != nil {
		return nil, err
	}
	resolved = slices.DeleteFunc(resolved, func(n string) bool { return slices.Contains(excluded, n) })
	slices.Sort(resolved)
	return slices.Compact(resolved), nil
}

func (r *Registry) resolveAll(names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	var unknown []string
	for _, name := range names {
		if runtime, ok := r.ResolveName(name); ok {
			out = append(out, runtime)
		} else {
			unknown = append(unknown, strings.TrimSpace(name))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, &UnknownToolsError{Names: slices.Compact(unknown)}
	}
	return out, nil
}

// UnknownToolsError reports names that resolve to no registered tool.
type UnknownToolsError struct {
	Names []string // sorted, trimmed
}

// Error returns "unknown tool name(s): 'a', 'b'".
func (e *UnknownToolsError) Error() string {
	quoted := make([]string, len(e.Names))
	for i, n := range e.Names {
		quoted[i] = "'" + n + "'"
	}
	return "unknown tool name(s): " + strings.Join(quoted, ", ")
}

// check reports why t cannot be registered.
func check(t Tool) error {
	if !validName.MatchString(t.Name) {
		return fmt.Errorf("%w: name must match %s", ErrInvalidTool, validName)
	}
	if t.Handler == nil {
		return fmt.Errorf("%w: no handler", ErrInvalidTool)
	}
	if t.Effect != "" {
		if _, err := ParseEffect(string(t.Effect)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTool, err)
		}
	}
	if err := checkSchema(t.Parameters); err != nil {
		return fmt.Errorf("%w: parameters: %w", ErrInvalidTool, err)
	}
	props := properties(t.Parameters)
	for _, name := range t.Order {
		if _, ok := props[name]; !ok {
			return fmt.Errorf("%w: order names unknown parameter %q", ErrInvalidTool, name)
		}
	}
	return nil
}
