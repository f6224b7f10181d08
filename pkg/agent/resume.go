package agent

import (
	"github.com/bubbus/bub/pkg/agent/recording"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// InterruptedToolMessage is the tool error the model gets, on resume, for
// a call of an irreversible tool that started before the crash and
// whose result was never recorded: running it again could repeat its
// effect (docs/durable.md).
const InterruptedToolMessage = "interrupted before its result was recorded; not retried"

// This file holds how the loop answers a step from [Run.Resume]: an event
// the recording holds is not emitted again (no handler runs, no sink sees
// it: the hooks already decided and the earlier attempt published it), and
// the loop goes on with the recorded values.

// recordedStep returns what the recording holds of step n (nil: nothing,
// or no recording).
func (r *Run) recordedStep(n int) *recording.Step { return r.Resume.Step(n) }

// recordedRequest applies a recorded llm_call.started to req (the request
// the loop rebuilt) and returns the recorded finish decision, if any.
func recordedRequest(req llm.Request, s *events.LLMCallStartedData) (llm.Request, *llm.Decision) {
	if s == nil {
		return req, nil
	}
	req.Model, req.MaxTokens, req.ToolNames = s.Model, s.MaxTokens, s.ToolNames
	if len(s.Messages) > 0 {
		req.Messages = s.Messages
	}
	if s.Decision != nil {
		return req, &llm.Decision{Text: s.Decision.Text}
	}
	return req, nil
}

// recordedResponse is the model's answer a recorded llm_call.finished
// holds, and its error.
func recordedResponse(f *events.LLMCallFinishedData) (llm.Response, error) {
	resp := llm.Response{Text: f.Text, ToolCalls: f.ToolCalls, Usage: f.Usage}
	if e := recordedError(f.Error); e != nil {
		return resp, e
	}
	return resp, nil
}

// recordedResult is the result a recorded tool_call.finished holds.
func recordedResult(runID string, f *events.ToolCallFinishedData) *tools.Result {
	res := &tools.Result{RunID: runID, Tool: f.Tool, Result: f.Result, Arguments: f.Arguments, DurationMS: f.DurationMS}
	if e := recordedError(f.Error); e != nil {
		res.Err = e
	}
	return res
}

// recordedError is a recorded error as a *bub.Error, nil for none.
func recordedError(e *events.ErrorData) *bub.Error {
	if e == nil {
		return nil
	}
	return &bub.Error{Kind: bub.Kind(e.Kind), Message: e.Message, Details: e.Details}
}
