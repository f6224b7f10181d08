package agent

import (
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// DecisionEvent turns a hook decision record into the hook.decision event
// that reports it (docs/hooks.md, "Decisions are events").
func DecisionEvent(rec hooks.DecisionRecord) *events.HookDecision {
	ev := &events.HookDecision{
		Plugin:     rec.Plugin,
		Hook:       string(rec.Hook),
		Action:     string(rec.Verdict),
		DurationMS: rec.Duration.Milliseconds(),
		Err:        rec.Err,
		Detail:     map[string]any{},
	}
	switch rec.Verdict {
	case hooks.VerdictFailed:
		ev.Action = "skipped"
	case hooks.VerdictAbort:
		ev.Detail["message"] = bub.AsError(rec.Err).Message
	}
	switch {
	case rec.LLMDecision != nil:
		ev.Detail["text"] = rec.LLMDecision.Text
	case rec.Request != nil && rec.Previous != nil:
		ev.Detail = llm.Changes(*rec.Previous, *rec.Request)
	case rec.ToolDecision != nil:
		d := rec.ToolDecision
		if d.Message != "" {
			ev.Detail["message"] = d.Message
		}
		if d.Arguments != nil {
			ev.Detail["arguments"] = d.Arguments
		}
		if d.Result != nil {
			ev.Detail["result"] = d.Result
		}
		if d.Action == tools.ActionAsk {
			ev.Detail["timeout_ms"], ev.Detail["default"] = d.TimeoutMS, string(d.Default)
		}
	}
	return ev
}
