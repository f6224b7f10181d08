package agent_test

import (
	"slices"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/events"
)

// TestOverflowPatternIsBubs (failed before its fix): bub-behaviour.md §5.3 step 3 and §11.9
// — "only context-length errors get one automatic handoff retry per run".
// Bub's pattern (bub/builtin/model_runner.py, CONTEXT_LENGTH_PATTERNS):
//
//	context.{0,20}(?:length|window)|maximum.{0,20}context|token.{0,10}limit|
//	prompt.{0,10}too long|tokens? > \d+ maximum
//
// The Go pattern (loop.go, contextOverflow) widened every gap
// (context.{0,40}, maximum.{0,40}, tokens?.{0,20}limit, prompt.{0,40}),
// so errors that are not context overflows in Bub handed off in Go — and a
// handoff is destructive: it appends an anchor, so the session's model
// context loses everything before it, for this and every later turn.
//
// Sequence: step 1's provider call fails with a quota error that is not a
// 429 (a proxy answering 403): "You exceeded your tokens per minute (TPM)
// limit for this key." ("token" and "limit" are 19 characters apart: no
// match in Bub; "tokens" and "limit" 18 apart: a match in Go).
//
// Expected (Bub): no handoff; StepFinished(error), the run fails, one
// provider request, no auto_handoff/context_overflow anchor.
// Before the fix: StepFinished(auto_handoff), an overflow anchor, and a second
// provider request retrying the prompt.
func TestOverflowPatternIsBubs(t *testing.T) {
	e := newEnv(t, []fakellm.Step{
		{Error: &fakellm.Error{Status: 403, Message: "You exceeded your tokens per minute (TPM) limit for this key.", Type: "insufficient_quota"}},
		{Text: "retried"},
	})
	_, err := e.run("hi")
	if err == nil {
		t.Error("run succeeded, want the provider's quota error")
	}
	var statuses []string
	for _, f := range eventsOf[*events.StepFinished](e.log) {
		statuses = append(statuses, f.Status)
	}
	if !slices.Equal(statuses, []string{"error"}) {
		t.Errorf("step statuses %v, want [error]", statuses)
	}
	if n := len(anchorsNamed(e.tape.entries(t), "auto_handoff/context_overflow")); n != 0 {
		t.Errorf("%d auto_handoff/context_overflow anchors, want none", n)
	}
	if n := len(e.requests()); n != 1 {
		t.Errorf("%d provider requests, want 1", n)
	}
}
