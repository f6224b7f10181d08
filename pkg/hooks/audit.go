package hooks

import (
	"time"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// Verdict is what one implementation of a chained hook did to a call.
type Verdict string

// The verdicts a [DecisionRecord] reports. An implementation without an
// opinion produces no record.
const (
	// VerdictModify: before_llm_call returned a new request, or
	// before_tool_call proceeded with new arguments.
	VerdictModify Verdict = "modify"
	// VerdictFinish: before_llm_call finished the call without the provider.
	VerdictFinish Verdict = "finish"
	// VerdictReplace: before_tool_call replaced the tool's result.
	VerdictReplace Verdict = "replace"
	// VerdictDeny: before_tool_call denied the call.
	VerdictDeny Verdict = "deny"
	// VerdictAsk: before_tool_call parked the call for a person's
	// approval.
	VerdictAsk Verdict = "ask"
	// VerdictFailed: the implementation failed and was skipped.
	VerdictFailed Verdict = "failed"
	// VerdictAbort: the implementation failed with [ErrAbort] (a
	// fail-closed policy that could not decide) and the call failed.
	VerdictAbort Verdict = "abort"
)

// DecisionRecord reports one implementation of before_llm_call or
// before_tool_call that changed, stopped or failed a call: which plugin
// decided what, and how long it took.
type DecisionRecord struct {
	Hook     Hook
	Plugin   string
	RunID    string
	Verdict  Verdict
	Duration time.Duration
	// Request is the new request of a before_llm_call modify, and
	// Previous the request that implementation received (as modified by
	// higher-priority ones): [llm.Changes](*Previous, *Request) is what
	// the decision changed.
	Request, Previous *llm.Request
	// LLMDecision is the decision of a before_llm_call finish.
	LLMDecision *llm.Decision
	// ToolDecision is the decision of a before_tool_call modify, replace,
	// deny or ask.
	ToolDecision *tools.Decision
	// Err is the failure of a VerdictFailed or VerdictAbort record (for
	// an abort, the error the caller gets: a *bub.Error naming the hook).
	Err error
}
