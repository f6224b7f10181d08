package telemetry

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
)

// Content attributes (recorded only with content capture on; the GenAI
// conventions define them as opt-in).
const (
	attrInputMessages  = attribute.Key("gen_ai.input.messages")
	attrOutputMessages = attribute.Key("gen_ai.output.messages")
	attrToolArguments  = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult     = attribute.Key("gen_ai.tool.call.result")
	attrLLMDecision    = attribute.Key(ns + ".llm.decision")
	attrToolDecision   = attribute.Key(ns + ".tool.decision")
	attrStatus         = attribute.Key(ns + ".run.status")
	attrSteps          = attribute.Key(ns + ".run.steps")
)

// maxContent bounds one content attribute (bytes).
const maxContent = 64 << 10

// AgentOptions configure [Instrument].
type AgentOptions struct {
	// CaptureContent puts prompts, responses, tool arguments and results
	// on spans (see [EnvCaptureContent]).
	CaptureContent bool
}

// Agent traces one agent run: the invoke_agent span ([Agent.Start]) and,
// from the run's lifecycle events, a `chat <model>` span per LLM call and
// an `execute_tool <name>` span per tool call, with the GenAI attributes
// and the token usage metrics. It is safe for concurrent use (tool calls
// run concurrently).
type Agent struct {
	capture bool

	// mu guards the fields below.
	mu        sync.Mutex
	span      trace.Span // invoke_agent; nil until Start
	chat      trace.Span // the open chat span, nil between calls
	chatStart time.Time
	tools     map[string]trace.Span // open execute_tool spans by call key
}

type runKey struct{}

func runFrom(ctx context.Context) *Agent {
	a, _ := ctx.Value(runKey{}).(*Agent)
	return a
}

// Instrument registers the run's tracing on bus and returns it; call
// [Agent.Start] with the context the run executes in. Register it before
// the handlers that call hooks (agent.Plugins), so a before_llm_call or
// before_tool_call interceptor request is parented to the call's span,
// and after the NATS bridge is attached, so each call's lifecycle events
// are published while its span is current.
//
// Spans end when the call's final event was dispatched (after the
// after_llm_call / after_tool_call hooks); a call that a before_* decision
// finished or that was cancelled ends at the latest with the run.
func Instrument(bus *events.Bus, o AgentOptions) *Agent {
	a := &Agent{capture: o.CaptureContent, tools: map[string]trace.Span{}}
	events.On(bus, a.onRunStarted)
	events.On(bus, a.onLLMCallStarted)
	events.On(bus, a.onToolCallStarted)
	bus.OnEmitted(a.emitted)
	return a
}

// Start starts the invoke_agent span of run runID of session as a child
// of ctx's span (for a subagent, of the parent run's open tool call) and
// returns the run's context (carry it into the run so
// [TraceContext] sees the open call spans) and the function that ends the
// span with the run's error.
func (a *Agent) Start(ctx context.Context, runID, session, model string) (context.Context, func(error)) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIConversationID(session),
		AttrRunID.String(runID),
	}
	attrs = append(attrs, modelAttrs(model)...)
	ctx, span := tracer().Start(contextOf(ctx), "invoke_agent", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	a.mu.Lock()
	a.span = span
	a.mu.Unlock()
	ctx = context.WithValue(ctx, runKey{}, a)
	return ctx, func(err error) {
		a.mu.Lock()
		dangling := make([]trace.Span, 0, len(a.tools)+1)
		if a.chat != nil {
			dangling = append(dangling, a.chat)
			a.chat = nil
		}
		for k, s := range a.tools {
			dangling = append(dangling, s)
			delete(a.tools, k)
		}
		a.mu.Unlock()
		for _, s := range dangling {
			s.SetStatus(codes.Error, "ended with the run")
			s.End()
		}
		End(span, err)
	}
}

// current returns the span context of the open chat span, else of the
// only open execute_tool span (with several tool calls in flight a
// context cannot tell them apart), else an invalid one.
func (a *Agent) current() trace.SpanContext {
	if s := a.currentSpan(); s != nil {
		return s.SpanContext()
	}
	return trace.SpanContext{}
}

func (a *Agent) currentSpan() trace.Span {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.chat != nil {
		return a.chat
	}
	if len(a.tools) == 1 {
		for _, s := range a.tools {
			return s
		}
	}
	return nil
}

// parent returns ctx with the invoke_agent span current.
func (a *Agent) parent(ctx context.Context) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.span != nil {
		return trace.ContextWithSpan(ctx, a.span)
	}
	return ctx
}

func (a *Agent) onRunStarted(_ context.Context, ev *events.RunStarted) error {
	a.mu.Lock()
	span := a.span
	a.mu.Unlock()
	if span != nil && ev.Model != "" {
		span.SetAttributes(modelAttrs(ev.Model)...)
	}
	return nil
}

func (a *Agent) onLLMCallStarted(ctx context.Context, ev *events.LLMCallStarted) error {
	_, span := tracer().Start(a.parent(ctx), chatName(ev.Request.Model),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(a.requestAttrs(ev.Request)...))
	a.mu.Lock()
	prev := a.chat
	a.chat, a.chatStart = span, time.Now()
	a.mu.Unlock()
	if prev != nil { // the previous call never finished (cancelled)
		prev.End()
	}
	return nil
}

func (a *Agent) onToolCallStarted(ctx context.Context, ev *events.ToolCallStarted) error {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(ev.Call.Tool),
		semconv.GenAIToolType("function"),
		AttrRunID.String(ev.RunID),
	}
	if ev.Call.CallID != "" {
		attrs = append(attrs, semconv.GenAIToolCallID(ev.Call.CallID))
	}
	if a.capture {
		attrs = append(attrs, attrToolArguments.String(jsonText(ev.Call.Arguments)))
	}
	_, span := tracer().Start(a.parent(ctx), "execute_tool "+ev.Call.Tool,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	a.mu.Lock()
	prev := a.tools[toolKey(ev.Call.CallID, ev.Call.Tool)]
	a.tools[toolKey(ev.Call.CallID, ev.Call.Tool)] = span
	a.mu.Unlock()
	if prev != nil {
		prev.End()
	}
	return nil
}

// emitted sees every event after its handlers (and after the bridge
// published it): it completes and ends the call spans.
func (a *Agent) emitted(ctx context.Context, ev events.Event) {
	switch ev := ev.(type) {
	case *events.LLMCallStarted:
		a.mu.Lock()
		span := a.chat
		if ev.Stopped() {
			a.chat = nil
		}
		a.mu.Unlock()
		if span == nil {
			return
		}
		span.SetName(chatName(ev.Request.Model)) // handlers may have changed the request
		span.SetAttributes(a.requestAttrs(ev.Request)...)
		if ev.Stopped() {
			span.SetAttributes(attrLLMDecision.String("finish"))
			if a.capture {
				span.SetAttributes(attrOutputMessages.String(jsonText([]llm.Message{{Role: llm.RoleAssistant, Content: llm.Text(ev.Decision.Text)}})))
			}
			span.End()
		}
	case *events.LLMCallFinished:
		a.mu.Lock()
		span, start := a.chat, a.chatStart
		a.chat = nil
		a.mu.Unlock()
		a.finishChat(ctx, span, start, ev)
	case *events.ToolCallStarted:
		if ev.Stopped() {
			a.mu.Lock()
			span := a.tools[toolKey(ev.Call.CallID, ev.Call.Tool)]
			a.mu.Unlock()
			if span != nil {
				span.SetAttributes(attrToolDecision.String(string(ev.Decision.Action)))
			}
		}
	case *events.ToolCallFinished:
		key := toolKey(ev.Call.CallID, ev.Call.Tool)
		a.mu.Lock()
		span := a.tools[key]
		delete(a.tools, key)
		a.mu.Unlock()
		if span == nil {
			return
		}
		if ev.Result != nil {
			if a.capture {
				span.SetAttributes(attrToolResult.String(jsonText(ev.Result.Result)))
			}
			Fail(span, ev.Result.Err)
		}
		span.End()
	case *events.RunFinished:
		a.mu.Lock()
		span := a.span
		a.mu.Unlock()
		if span != nil {
			span.SetAttributes(attrStatus.String(ev.Status), attrSteps.Int(ev.Steps))
		}
	}
}

// finishChat records the outcome of an LLM call on its span and in the
// GenAI client metrics, and ends the span.
func (a *Agent) finishChat(ctx context.Context, span trace.Span, start time.Time, ev *events.LLMCallFinished) {
	res := ev.Result
	// The metrics' attribute sets are built only when a meter provider
	// records them (without one every instrument is disabled).
	if m := instr(); m.opDuration.Enabled(ctx) {
		provider, model := splitModel(ev.Request.Model)
		mattrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(provider), semconv.GenAIRequestModel(model)}
		if res.Err != nil {
			mattrs = append(mattrs, semconv.ErrorTypeKey.String(errorType(res.Err)))
		}
		dur := time.Duration(res.DurationMS) * time.Millisecond
		if dur == 0 && !start.IsZero() {
			dur = time.Since(start)
		}
		m.opDuration.Record(ctx, dur.Seconds(), metric.WithAttributes(mattrs...))
		if u := res.Usage; u != nil {
			m.tokenUsage.Record(ctx, int64(u.PromptTokens), metric.WithAttributes(append(mattrs, semconv.GenAITokenTypeInput)...))
			m.tokenUsage.Record(ctx, int64(u.CompletionTokens), metric.WithAttributes(append(mattrs, semconv.GenAITokenTypeOutput)...))
		}
	}
	if span == nil {
		return
	}
	if u := res.Usage; u != nil {
		span.SetAttributes(semconv.GenAIUsageInputTokens(u.PromptTokens), semconv.GenAIUsageOutputTokens(u.CompletionTokens))
	}
	finish := "stop"
	if len(res.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if res.Err == nil {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(finish))
	}
	if a.capture {
		span.SetAttributes(attrOutputMessages.String(jsonText([]llm.Message{{Role: llm.RoleAssistant, Content: llm.Text(res.Text), ToolCalls: res.ToolCalls}})))
	}
	Fail(span, res.Err)
	span.End()
}

func (a *Agent) requestAttrs(req llm.Request) []attribute.KeyValue {
	attrs := append([]attribute.KeyValue{semconv.GenAIOperationNameChat, AttrRunID.String(req.RunID)}, modelAttrs(req.Model)...)
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if a.capture {
		attrs = append(attrs, attrInputMessages.String(jsonText(req.Messages)))
	}
	return attrs
}

// modelAttrs are gen_ai.provider.name and gen_ai.request.model of a
// "provider:model" string.
func modelAttrs(s string) []attribute.KeyValue {
	provider, model := splitModel(s)
	var out []attribute.KeyValue
	if provider != "" {
		out = append(out, semconv.GenAIProviderNameKey.String(provider))
	}
	if model != "" {
		out = append(out, semconv.GenAIRequestModel(model))
	}
	return out
}

func splitModel(s string) (provider, model string) {
	p, m, err := llm.ParseModel(s)
	if err != nil {
		return "", strings.TrimSpace(s)
	}
	return p, m
}

// chatName is the GenAI span name of an LLM call: "chat <model>".
func chatName(s string) string {
	if _, m := splitModel(s); m != "" {
		return "chat " + m
	}
	return "chat"
}

func toolKey(callID, tool string) string {
	if callID != "" {
		return callID
	}
	return "tool:" + tool
}

// jsonText renders v as JSON for a content attribute, truncated.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	if len(b) > maxContent {
		return strings.ToValidUTF8(string(b[:maxContent]), "") + "…"
	}
	return string(b)
}
