package toolkit

import (
	"context"
	"errors"
	"strings"

	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

var errNoTape = errors.New("tape unavailable in this context")

// tapeTool wraps a handler that needs the call's tape.
func tapeTool(t tools.Tool, run func(ctx context.Context, tp tools.Tape, args map[string]any) (any, error)) tools.Tool {
	t.RequiresContext = true
	t.Handler = func(ctx context.Context, tc *tools.Context, args map[string]any) (any, error) {
		if tc.Tape == nil {
			return nil, errNoTape
		}
		return run(ctx, tc.Tape, args)
	}
	return t
}

// tapeTools are tape.info, tape.search, tape.reset, tape.handoff and
// tape.anchors (Bub's tape tools).
func tapeTools(Options) []tools.Tool {
	return []tools.Tool{
		tapeTool(tools.Tool{Name: "tape.info", Effect: tools.EffectReadOnly, Description: "Get information about the current tape, such as number of entries and anchors."},
			func(ctx context.Context, tp tools.Tape, _ map[string]any) (any, error) {
				info, err := tp.Info(ctx)
				if err != nil {
					return nil, err
				}
				return info.String(), nil
			}),
		tapeTool(withParams(tools.Tool{Name: "tape.search", Effect: tools.EffectReadOnly, Description: "Search for entries in the current tape that match the query. Returns a list of matching entries."},
			param{name: "query", typ: "string", description: "Text to search for.", required: true},
			param{name: "limit", typ: "integer", description: "Maximum number of results.", def: 20},
			param{name: "start", typ: "string", description: "Earliest date (ISO date or datetime)."},
			param{name: "end", typ: "string", description: "Latest date (ISO date or datetime)."},
			param{name: "kinds", typ: "array", description: "Entry kinds to search.", def: []any{tape.KindMessage, tape.KindToolResult}, extra: map[string]any{"items": map[string]any{"type": "string"}}},
		), func(ctx context.Context, tp tools.Tape, args map[string]any) (any, error) {
			s := tape.Search{Query: stringArg(args, "query"), Start: stringArg(args, "start"), End: stringArg(args, "end")}
			if n, ok := intArg(args, "limit"); ok {
				s.Limit = n
			}
			if ks, ok := args["kinds"].([]any); ok {
				s.Kinds = []string{}
				for _, k := range ks {
					if str, ok := k.(string); ok {
						s.Kinds = append(s.Kinds, str)
					}
				}
			}
			res, err := tp.Search(ctx, s)
			if err != nil {
				return nil, err
			}
			return res.String(), nil
		}),
		tapeTool(withParams(tools.Tool{Name: "tape.reset", Effect: tools.EffectIrreversible, Description: "Reset the current tape, optionally archiving it."},
			param{name: "archive", typ: "boolean", description: "Keep an archive of the entries.", def: false},
		), func(ctx context.Context, tp tools.Tape, args map[string]any) (any, error) {
			return tp.Reset(ctx, boolArg(args, "archive"))
		}),
		tapeTool(withParams(tools.Tool{Name: "tape.handoff", Effect: tools.EffectIrreversible, Description: "Add a handoff anchor to the current tape: later context starts after it."},
			param{name: "name", typ: "string", description: "Anchor name.", def: "handoff"},
			param{name: "summary", typ: "string", description: "Summary of what happened so far.", def: ""},
		), func(ctx context.Context, tp tools.Tape, args map[string]any) (any, error) {
			name := stringArg(args, "name")
			if name == "" {
				name = "handoff"
			}
			if err := tp.Handoff(ctx, name, map[string]any{"summary": stringArg(args, "summary")}); err != nil {
				return nil, err
			}
			return "anchor added: " + name, nil
		}),
		tapeTool(tools.Tool{Name: "tape.anchors", Effect: tools.EffectReadOnly, Description: "List anchors in the current tape."},
			func(ctx context.Context, tp tools.Tape, _ map[string]any) (any, error) {
				anchors, err := tp.Anchors(ctx, 20)
				if err != nil {
					return nil, err
				}
				if len(anchors) == 0 {
					return "(no anchors)", nil
				}
				lines := make([]string, len(anchors))
				for i, a := range anchors {
					lines[i] = "- " + a.Name
				}
				return strings.Join(lines, "\n"), nil
			}),
	}
}
