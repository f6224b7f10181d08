package telemetry

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// testTracer returns a tracer of a real SDK provider (no exporter): spans
// have valid, distinct ids.
func testTracer(t *testing.T) trace.Tracer {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test")
}

// TestNATSCarrierKeepsLowerCaseKeys pins why the package has its own
// carrier: nats.Header is case-sensitive and the W3C keys are lower case,
// while propagation.HeaderCarrier canonicalises them.
func TestNATSCarrierKeepsLowerCaseKeys(t *testing.T) {
	ctx, span := testTracer(t).Start(context.Background(), "x")
	defer span.End()

	h := nats.Header{}
	InjectNATS(ctx, h)
	if got := h[subjects.HeaderTraceparent]; len(got) != 1 || got[0] == "" {
		t.Fatalf("header %q = %v; headers %v", subjects.HeaderTraceparent, got, h)
	}
	msg := nats.NewMsg("x")
	msg.Header = h
	if got := msg.Header.Get(subjects.HeaderTraceparent); got == "" {
		t.Fatal("nats.Header.Get cannot read what InjectNATS wrote")
	}
	back := trace.SpanContextFromContext(ExtractNATS(context.Background(), h))
	if back.TraceID() != span.SpanContext().TraceID() || back.SpanID() != span.SpanContext().SpanID() || !back.IsRemote() {
		t.Fatalf("round trip: %v, want %v", back, span.SpanContext())
	}

	// The canonicalising carrier writes a key nats readers do not find.
	canon := nats.Header{}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(canon))
	if _, ok := canon[subjects.HeaderTraceparent]; ok {
		t.Fatal("propagation.HeaderCarrier unexpectedly kept the lower-case key")
	}
	if got := trace.SpanContextFromContext(ExtractNATS(context.Background(), canon)); got.IsValid() {
		t.Fatalf("extracted %v from canonicalised headers", got)
	}
}

func TestTraceContextRoundTripsThroughCloudEvents(t *testing.T) {
	if tp, ts := TraceContext(context.Background()); tp != "" || ts != "" {
		t.Fatalf("no span: got %q %q", tp, ts)
	}
	ctx, span := testTracer(t).Start(context.Background(), "x")
	defer span.End()
	ts, _ := trace.ParseTraceState("bub=1")
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(ts))

	tp, tstate := TraceContext(ctx)
	if tp == "" || tstate != "bub=1" {
		t.Fatalf("TraceContext = %q, %q", tp, tstate)
	}
	e, err := events.New(events.TypeRunStarted, events.Attrs{Source: "/bub/test/1", Traceparent: tp, Tracestate: tstate}, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.SpanContextFromContext(FromEvent(context.Background(), e))
	if sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || sc.TraceState().Get("bub") != "1" {
		t.Fatalf("FromEvent: %v", sc)
	}
	if got := SpanContextOf(tp, tstate); !got.Equal(sc) {
		t.Fatalf("SpanContextOf = %v, want %v", got, sc)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if got := trace.SpanContextFromContext(ContextWithTrace(context.Background(), bad, "")); got.IsValid() {
			t.Errorf("ContextWithTrace(%q) = %v, want none", bad, got)
		}
	}
}
