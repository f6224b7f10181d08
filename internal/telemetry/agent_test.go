package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/internal/telemetry/telemetrytest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	t.Fatalf("no span %q among %v", name, names)
	return nil
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestInstrumentTracesCallsOfARun emits the events of a run with one LLM
// call, one tool call (denied after a failure) and one LLM call finished
// by a decision, and checks the GenAI spans, their parents, what a later
// handler (an interceptor adapter) sees as current trace context, and the
// token metrics.
func TestInstrumentTracesCallsOfARun(t *testing.T) {
	rec, reader := telemetrytest.UseProviders(t)
	parentCtx, parent := otel.Tracer("test").Start(context.Background(), "process turn")

	bus := &events.Bus{}
	a := Instrument(bus, AgentOptions{CaptureContent: true})
	// A handler registered after Instrument, like the hook adapter whose
	// before_* calls reach remote interceptors.
	seen := map[string]string{}
	events.On(bus, func(ctx context.Context, ev *events.LLMCallStarted) error {
		seen["llm:"+ev.Request.Model], _ = TraceContext(ctx)
		if ev.Request.Model == "openai:stop" {
			ev.Decision = llm.Finish("stopped by policy")
		}
		return nil
	})
	events.On(bus, func(ctx context.Context, ev *events.ToolCallStarted) error {
		seen["tool:"+ev.Call.Tool], _ = TraceContext(ctx)
		ev.Decision = tools.Deny("no")
		return nil
	})

	ctx, end := a.Start(parentCtx, "run-1", "sess-1", "")
	meta := events.Meta{RunID: "run-1", SessionID: "sess-1"}
	emit := func(ev events.Event) {
		t.Helper()
		if _, err := events.Emit(ctx, bus, ev); err != nil {
			t.Fatal(err)
		}
	}
	emit(&events.RunStarted{Meta: meta, Model: "openai:gpt-x"})
	req := llm.Request{RunID: "run-1", Model: "openai:gpt-x", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}, MaxTokens: 100}
	emit(&events.LLMCallStarted{Meta: meta, Request: req})
	emit(&events.LLMCallFinished{Meta: meta, Request: req, Result: llm.Result{RunID: "run-1", ToolCalls: []llm.ToolCall{{ID: "call_1"}},
		Usage: &llm.Usage{PromptTokens: 12, CompletionTokens: 5}, DurationMS: 30}})
	call := tools.Call{RunID: "run-1", Tool: "tape.info", CallID: "call_1", Arguments: map[string]any{"q": 1}}
	emit(&events.ToolCallStarted{Meta: meta, Call: call})
	emit(&events.ToolCallFinished{Meta: meta, Call: call, Result: &tools.Result{Err: &bub.Error{Kind: bub.KindTool, Message: "denied"}}})
	stop := req
	stop.Model = "openai:stop"
	emit(&events.LLMCallStarted{Meta: meta, Request: stop})
	emit(&events.RunFinished{Meta: meta, Status: events.RunOK, Steps: 2})
	end(nil)
	parent.End()

	spans := rec.Ended()
	agent := spanNamed(t, spans, "invoke_agent")
	if agent.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("invoke_agent parent %v, want the turn span", agent.Parent().SpanID())
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "sess-1", "gen_ai.request.model": "gpt-x", "gen_ai.provider.name": "openai", "bub.run.status": "ok"} {
		if got := attr(agent, k).Emit(); got != want {
			t.Errorf("invoke_agent %s = %q, want %q", k, got, want)
		}
	}

	chat := spanNamed(t, spans, "chat gpt-x")
	if chat.Parent().SpanID() != agent.SpanContext().SpanID() || chat.SpanKind() != trace.SpanKindClient {
		t.Errorf("chat span: parent %v kind %v", chat.Parent().SpanID(), chat.SpanKind())
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-x",
		"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "5", "gen_ai.request.max_tokens": "100", "gen_ai.response.finish_reasons": `["tool_calls"]`} {
		if got := attr(chat, k).Emit(); got != want {
			t.Errorf("chat %s = %q, want %q", k, got, want)
		}
	}
	if got := attr(chat, "gen_ai.input.messages").Emit(); !strings.Contains(got, `"hi"`) {
		t.Errorf("captured input messages %q", got)
	}
	if got, want := seen["llm:openai:gpt-x"], traceparentOf(chat.SpanContext()); got != want {
		t.Errorf("a handler during the call sees traceparent %q, want the chat span's %q", got, want)
	}

	tool := spanNamed(t, spans, "execute_tool tape.info")
	if tool.Parent().SpanID() != agent.SpanContext().SpanID() || tool.Status().Code != codes.Error {
		t.Errorf("tool span: parent %v status %v", tool.Parent().SpanID(), tool.Status())
	}
	for k, want := range map[string]string{"gen_ai.tool.name": "tape.info", "gen_ai.tool.call.id": "call_1", "bub.tool.decision": "deny", "error.type": "tool", "gen_ai.tool.call.arguments": `{"q":1}`} {
		if got := attr(tool, k).Emit(); got != want {
			t.Errorf("tool %s = %q, want %q", k, got, want)
		}
	}
	if got, want := seen["tool:tape.info"], traceparentOf(tool.SpanContext()); got != want {
		t.Errorf("a handler during the tool call sees %q, want the tool span's %q", got, want)
	}

	stopped := spanNamed(t, spans, "chat stop")
	if got := attr(stopped, "bub.llm.decision").Emit(); got != "finish" {
		t.Errorf("decided chat: bub.llm.decision = %q", got)
	}
	if n := len(spans); n != 5 {
		t.Errorf("%d spans ended, want 5 (turn, invoke_agent, 2 chat, 1 tool)", n)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	usage := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricTokenUsage {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
				typ, _ := dp.Attributes.Value("gen_ai.token.type")
				usage[typ.AsString()] += dp.Sum
			}
		}
	}
	if usage["input"] != 12 || usage["output"] != 5 {
		t.Errorf("token usage metric %v, want input 12 output 5", usage)
	}
}

// TestRunEndEndsDanglingSpans: a call that never finished (cancelled, or
// a hook aborted it) ends with the run.
func TestRunEndEndsDanglingSpans(t *testing.T) {
	rec, _ := telemetrytest.UseProviders(t)
	bus := &events.Bus{}
	a := Instrument(bus, AgentOptions{})
	ctx, end := a.Start(context.Background(), "r", "s", "echo:echo")
	meta := events.Meta{RunID: "r", SessionID: "s"}
	_, _ = events.Emit(ctx, bus, &events.LLMCallStarted{Meta: meta, Request: llm.Request{Model: "echo:echo"}})
	_, _ = events.Emit(ctx, bus, &events.ToolCallStarted{Meta: meta, Call: tools.Call{Tool: "a", CallID: "1"}})
	_, _ = events.Emit(ctx, bus, &events.ToolCallStarted{Meta: meta, Call: tools.Call{Tool: "b", CallID: "2"}})
	end(errors.New("boom"))
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans ended, want 4", len(spans))
	}
	if s := spanNamed(t, spans, "invoke_agent"); s.Status().Code != codes.Error {
		t.Errorf("invoke_agent status %v", s.Status())
	}
	if got := attr(spanNamed(t, spans, "chat echo"), "gen_ai.input.messages"); got.Type() != attribute.INVALID {
		t.Error("content captured although capture is off")
	}
}

// TestRecordDecisionCounts checks the hook decision metric and span event.
func TestRecordDecisionCounts(t *testing.T) {
	rec, reader := telemetrytest.UseProviders(t)
	ctx, span := otel.Tracer("test").Start(context.Background(), "call")
	RecordDecision(ctx, hooks.DecisionRecord{Hook: hooks.HookBeforeToolCall, Plugin: "policy", Verdict: hooks.VerdictDeny})
	span.End()
	if evs := rec.Ended()[0].Events(); len(evs) != 1 || evs[0].Name != "hook.decision" {
		t.Fatalf("span events %v", evs)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricHookDecisions {
				dp := m.Data.(metricdata.Sum[int64]).DataPoints[0]
				p, _ := dp.Attributes.Value(AttrPlugin)
				d, _ := dp.Attributes.Value(AttrDecision)
				found = dp.Value == 1 && p.AsString() == "policy" && d.AsString() == "deny"
			}
		}
	}
	if !found {
		t.Fatalf("no %s data point for policy/deny: %+v", MetricHookDecisions, rm.ScopeMetrics)
	}
}

func traceparentOf(sc trace.SpanContext) string {
	tp, _ := TraceContext(trace.ContextWithSpanContext(context.Background(), sc))
	return tp
}
