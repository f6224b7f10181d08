package telemetry

import (
	"context"
	"maps"
	"slices"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// w3c is the propagator of every hop: the CloudEvent extensions and the
// NATS headers carry W3C trace context (docs/events/README.md, "Attributes
// and extensions"), whatever global propagator a process configured.
var w3c propagation.TraceContext

// natsCarrier adapts nats.Header to propagation.TextMapCarrier. nats.Header
// is case-sensitive, and the W3C keys are lower case (traceparent,
// tracestate), so unlike propagation.HeaderCarrier it never canonicalises
// a key.
type natsCarrier nats.Header

var _ propagation.TextMapCarrier = natsCarrier(nil)

// Get returns the first value of key, exactly as spelled.
func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key, exactly as spelled.
func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header keys.
func (c natsCarrier) Keys() []string {
	return slices.Sorted(maps.Keys(c))
}

// InjectNATS writes the trace context of ctx into h (traceparent and,
// when set, tracestate). It does nothing without a valid span context.
func InjectNATS(ctx context.Context, h nats.Header) {
	if h == nil {
		return
	}
	w3c.Inject(contextOf(ctx), natsCarrier(h))
}

// ExtractNATS returns ctx carrying the remote trace context of h, or ctx
// unchanged when h has none.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return w3c.Extract(ctx, natsCarrier(h))
}

// TraceContext returns the W3C traceparent and tracestate of the span
// current in ctx ("" without a valid span context). Inside an
// instrumented agent run (see [Instrument]) the current span is the open
// `chat` span, or the one open `execute_tool` span, so what a handler
// emits or an interceptor is asked during that call is parented to it.
//
// Its signature fits events.WithTraceContext and remote.WithTraceContext.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	c := mapCarrier{}
	w3c.Inject(contextOf(ctx), c)
	return c[subjects.HeaderTraceparent], c[subjects.HeaderTracestate]
}

// ContextWithTrace returns ctx carrying the remote span context of a
// traceparent and tracestate pair, or ctx unchanged when traceparent is
// empty or malformed.
//
// Its signature fits interceptor.WithTraceContext.
func ContextWithTrace(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, mapCarrier{subjects.HeaderTraceparent: traceparent, subjects.HeaderTracestate: tracestate})
}

// FromEvent returns ctx carrying the trace context of a CloudEvent's
// traceparent and tracestate extensions.
func FromEvent(ctx context.Context, e ce.Event) context.Context {
	tp, ts := events.Traceparent(e)
	return ContextWithTrace(ctx, tp, ts)
}

// SpanContextOf returns the remote span context a traceparent/tracestate
// pair names (invalid when there is none).
func SpanContextOf(traceparent, tracestate string) trace.SpanContext {
	return trace.SpanContextFromContext(ContextWithTrace(context.Background(), traceparent, tracestate))
}

// mapCarrier is a carrier over exact keys.
type mapCarrier map[string]string

func (c mapCarrier) Get(key string) string { return c[key] }
func (c mapCarrier) Set(key, value string) { c[key] = value }
func (c mapCarrier) Keys() []string        { return slices.Sorted(maps.Keys(c)) }

// contextOf returns ctx with the span current inside an instrumented agent
// run (see [TraceContext]) made current.
func contextOf(ctx context.Context) context.Context {
	if r := runFrom(ctx); r != nil {
		if sc := r.current(); sc.IsValid() {
			return trace.ContextWithSpanContext(ctx, sc)
		}
	}
	return ctx
}
