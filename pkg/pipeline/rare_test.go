package pipeline_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/pipeline"
)

// TestOnErrorShowsThePlainRunError (failed before its fix): behaviour check 56 — "Given
// on_error(stage "turn", RuntimeError "bad"), one dispatch_outbound is
// issued with kind error and content "An error occurred at stage 'turn':
// bad"" — and bub-behaviour.md §3: the builtin on_error content is
// "An error occurred at stage '<stage>': <error text>" (str(error)).
//
// Sequence: a turn whose model stream (the agent run) fails with an
// ordinary error — the agent's own "max_steps_reached=3" (§5.3:
// RuntimeError(f"max_steps_reached={N}")), a comma command's
// "empty command" or "positional argument … cannot appear after keyword
// arguments", or any plain error — reaches the builtin on_error.
//
// Expected: the user sees the run's error text, e.g. "An error occurred
// at stage 'turn': max_steps_reached=3", as Python Bub shows str(exc).
// Before the fix: the pipeline wraps the stream error as "run_model: %w" and the
// builtin's errorText strips only *hooks.HookError attribution, so the
// user sees "An error occurred at stage 'turn': run_model:
// max_steps_reached=3". (A *bub.Error escapes the prefix only because
// errorText looks for one with errors.As.)
func TestOnErrorShowsThePlainRunError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"max steps", fmt.Errorf("%w=%d", agent.ErrMaxSteps, 3), "An error occurred at stage 'turn': max_steps_reached=3"},
		{"plain error", errBad, "An error occurred at stage 'turn': bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &outbox{}
			r := &runner{run: func(hooks.RunModelInput) (hooks.Stream, error) {
				return failingStream("partial", tt.err), nil
			}}
			fw := withBuiltin(t, r, o)
			msg := &envelope.Envelope{ID: "in-9", Content: "hello", Channel: "telegram", ChatID: "42"}

			_, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})
			if !errors.Is(err, tt.err) {
				t.Fatalf("turn error = %v, want %v", err, tt.err)
			}
			want := &envelope.Envelope{
				ID: "in-9/error/turn", SessionID: "telegram:42", Channel: "telegram", ChatID: "42",
				Content: tt.want, Kind: envelope.KindError, OutputChannel: "telegram",
				InReplyTo: "in-9", BatchSize: 1,
			}
			if len(o.sent) != 1 || !reflect.DeepEqual(o.sent[0], want) {
				for _, e := range o.sent {
					t.Logf("sent %+v", *e)
				}
				t.Errorf("want exactly one error reply with content %q", tt.want)
			}
		})
	}
}
