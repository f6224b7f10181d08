package toolkit

import (
	"context"
	"errors"
	"strings"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// HelpText is what the help command prints.
const HelpText = "Commands use ',' at line start.\n" +
	"Known internal commands:\n" +
	"  ,help\n" +
	"  ,skill name=foo\n" +
	"  ,tape.info\n" +
	"  ,tape.search query=error\n" +
	"  ,tape.handoff name=phase-1 summary='done'\n" +
	"  ,tape.anchors\n" +
	"  ,fs.read path=README.md\n" +
	"  ,fs.write path=tmp.txt content='hello'\n" +
	"  ,fs.edit path=tmp.txt old=hello new=world\n" +
	"  ,bash cmd='sleep 5' background=true\n" +
	"  ,bash.output shell_id=bash-12345678\n" +
	"  ,bash.kill shell_id=bash-12345678\n" +
	"  ,quit\n" +
	"Any unknown command after ',' is executed as shell via bash."

var errNoState = errors.New("no session state in the tool context")

// sessionTools are the hidden command-only tools. model and
// reasoning_effort change the turn state and record a model_switch /
// reasoning_effort_switch tape event, which carries the change to later
// turns.
func sessionTools(opts Options) []tools.Tool {
	return []tools.Tool{
		{
			Name:        "help",
			Effect:      tools.EffectReadOnly,
			Description: "Show a help message.",
			Hidden:      true,
			Handler: func(context.Context, *tools.Context, map[string]any) (any, error) {
				return HelpText, nil
			},
		},
		withParams(tools.Tool{
			Name:            "model",
			Effect:          tools.EffectIdempotent,
			Description:     "Switch the model for this session from the next turn on. Invoke as ,model <provider:model>; without a model it lists the models the plugins offer.",
			Hidden:          true,
			RequiresContext: true,
			Handler: func(ctx context.Context, tc *tools.Context, args map[string]any) (any, error) {
				if strings.TrimSpace(stringArg(args, "model_id")) == "" && opts.RuntimeOptions != nil {
					return listModels(ctx, tc, opts.RuntimeOptions)
				}
				id, err := setState(ctx, tc, bub.StateModel, "model_id", tape.EventModelSwitch, "model", args)
				if err != nil {
					return nil, err
				}
				return "Session model set to " + id + " (applies from the next turn).", nil
			},
		},
			param{name: "model_id", typ: "string", description: "A provider:model string, e.g. openai:gpt-4o; empty lists the models on offer."},
		),
		withParams(tools.Tool{
			Name:            "reasoning_effort",
			Effect:          tools.EffectIdempotent,
			Description:     "Set the reasoning effort for this session starting from the next turn.",
			Hidden:          true,
			RequiresContext: true,
			Handler: func(ctx context.Context, tc *tools.Context, args map[string]any) (any, error) {
				effort, err := setState(ctx, tc, bub.StateReasoningEffort, "reasoning_effort", tape.EventReasoningEffortSwitch, "reasoning_effort", args)
				if err != nil {
					return nil, err
				}
				return "Session reasoning effort set to " + effort + " (applies from the next turn).", nil
			},
		},
			param{name: "reasoning_effort", typ: "string", description: "e.g. low, medium or high.", required: true},
		),
		{
			Name:            "quit",
			Effect:          tools.EffectIdempotent,
			Description:     "Abort the tasks of the current session. DO NOT use it in a normal workflow.",
			Hidden:          true,
			RequiresContext: true,
			Handler: func(ctx context.Context, tc *tools.Context, _ map[string]any) (any, error) {
				session := tc.Session()
				opts.Shells.TerminateSession(session)
				if opts.Quit != nil {
					if err := opts.Quit(ctx, session); err != nil {
						return nil, err
					}
				}
				return "Session tasks stopped.", nil
			},
		},
	}
}

// setState stores the trimmed argument arg under key in the turn state and
// records the tape event event {field: value} when the call has a tape.
func setState(ctx context.Context, tc *tools.Context, key, arg, event, field string, args map[string]any) (string, error) {
	v := strings.TrimSpace(stringArg(args, arg))
	if v == "" {
		return "", errors.New(arg + " must not be empty")
	}
	if tc.State == nil {
		return "", errNoState
	}
	tc.State.Set(key, v)
	if tc.Tape != nil {
		if err := tc.Tape.AppendEvent(ctx, event, map[string]any{field: v}); err != nil {
			return "", err
		}
	}
	return v, nil
}

// listModels renders the models provide_runtime_options offers, in
// priority order, marking the session's current one (its switch, else
// the suggested current model).
func listModels(ctx context.Context, tc *tools.Context, options RuntimeOptions) (string, error) {
	opts, err := options(ctx, tc.Session())
	if err != nil {
		return "", err
	}
	current := opts.Current
	if tc.State != nil {
		if m := tc.State.String(bub.StateModel); m != "" {
			current = m
		}
	}
	return FormatModels(opts.Models, current), nil
}

// FormatModels renders model choices one per line, "* " marking current
// and "  " the others, each with its description when it has one; no
// choices → "(no models offered)".
func FormatModels(models []hooks.ModelChoice, current string) string {
	if len(models) == 0 {
		return "(no models offered)"
	}
	var b strings.Builder
	for i, m := range models {
		if i > 0 {
			b.WriteByte('\n')
		}
		mark := "  "
		if m.ID == current {
			mark = "* "
		}
		b.WriteString(mark + m.ID)
		if m.Name != "" && m.Name != m.ID {
			b.WriteString(" (" + m.Name + ")")
		}
		if m.Description != "" {
			b.WriteString(": " + m.Description)
		}
	}
	return b.String()
}
