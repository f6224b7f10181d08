package agent

import (
	"errors"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
)

// An aborted call (a fail-closed interceptor that did not answer) is a
// decision like a denial: a hook.decision event with action abort, saying
// why in the detail and the error.
func TestAbortIsADecisionEvent(t *testing.T) {
	cause := bub.Errorf(bub.KindTemporary, `before_llm_call: interceptor "policy" has no running instance, and it fails closed; the call was aborted.`)
	ev := DecisionEvent(hooks.DecisionRecord{Hook: hooks.HookBeforeLLMCall, Plugin: "policy", Verdict: hooks.VerdictAbort, Err: errors.Join(hooks.ErrAbort, cause)})
	if ev.Action != "abort" || ev.Hook != "before_llm_call" || ev.Plugin != "policy" {
		t.Fatalf("event = %+v, want action abort of before_llm_call by policy", ev)
	}
	if ev.Detail["message"] != cause.Message || ev.Err == nil {
		t.Fatalf("detail = %v, err = %v; want the abort's message and error", ev.Detail, ev.Err)
	}
}
