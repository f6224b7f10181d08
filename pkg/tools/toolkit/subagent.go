package toolkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/bubbus/bub/pkg/tools"
)

// subagentTools is the subagent tool (Bub's). It needs the registry to
// resolve allowed tool names, so Register passes it through Options.
func subagentTools(opts Options) []tools.Tool {
	return []tools.Tool{withParams(tools.Tool{
		Name:            "subagent",
		Effect:          tools.EffectIrreversible,
		Description:     "Run a subagent on a task and return its answer. session: inherit (this session), temp (a throwaway session, the default) or a session id.",
		RequiresContext: true,
		Handler: func(ctx context.Context, tc *tools.Context, args map[string]any) (any, error) {
			if tc.Spawner == nil {
				return nil, errors.New("no runtime agent found in tool context")
			}
			req := tools.SpawnRequest{
				Prompt:  stringArg(args, "prompt"),
				Model:   stringArg(args, "model"),
				Session: subagentSession(stringArg(args, "session"), tc.Session()),
			}
			allowed := stringList(args["allowed_tools"])
			if opts.registry != nil {
				names, err := opts.registry.ResolveNames(nilIfEmpty(allowed), []string{"subagent"})
				if err != nil {
					return nil, err
				}
				req.AllowedTools = names
			}
			if v, given := args["allowed_skills"]; given && v != nil {
				// Given, even empty: [] allows no skill (nil would be all).
				req.AllowedSkills = stringList(v)
			}
			return tc.Spawner.Spawn(ctx, req)
		},
	},
		param{name: "prompt", typ: "string", description: "The task for the subagent.", required: true},
		param{name: "model", typ: "string", description: "A provider:model for the subagent."},
		param{name: "session", typ: "string", description: "inherit, temp or a session id.", def: "temp"},
		param{name: "allowed_tools", typ: "array", description: "Tool names the subagent may use (default all but subagent).", extra: map[string]any{"items": map[string]any{"type": "string"}}},
		param{name: "allowed_skills", typ: "array", description: "Skill names the subagent may use.", extra: map[string]any{"items": map[string]any{"type": "string"}}},
	)}
}

// subagentSession resolves Bub's session argument: "inherit" → the
// parent's session (temp/unknown when none), "temp" or empty → a fresh
// temp/<8 hex>, anything else as given.
func subagentSession(arg, parent string) string {
	switch arg {
	case "inherit":
		if parent == "" {
			return tools.TempSessionPrefix + "unknown"
		}
		return parent
	case "", "temp":
		var b [4]byte
		_, _ = rand.Read(b[:])
		return tools.TempSessionPrefix + hex.EncodeToString(b[:])
	}
	return arg
}

func stringList(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
