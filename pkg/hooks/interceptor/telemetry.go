package interceptor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
)

// This file traces and measures each request through the global
// OpenTelemetry providers (no-ops until a process installs real ones):
// a server span per request, a child of the caller's trace context (see
// [WithTraceContext]), and the bub.interceptor.server.duration histogram.

// ns is the namespace of Bub's attribute and metric names (bub.*).
const ns = "bub"

// scope is the instrumentation scope of the spans and metrics.
const scope = "github.com/bubbus/bub/pkg/hooks/interceptor"

// metricDuration is the histogram of request handling time, by service,
// hook and outcome (ok or the error kind).
const metricDuration = ns + ".interceptor.server.duration"

// Attributes of the span and the metric.
const (
	attrService = attribute.Key(ns + ".interceptor.service")
	attrHook    = attribute.Key(ns + ".hook.name")
	attrRunID   = attribute.Key(ns + ".run.id")
	attrOutcome = attribute.Key(ns + ".outcome")
)

// instruments caches the tracer and the histogram of the current global
// providers: a request looks them up with one comparison each.
var instruments struct {
	mu sync.Mutex
	tp trace.TracerProvider
	t  trace.Tracer
	mp metric.MeterProvider
	h  metric.Float64Histogram
}

// current returns the tracer and the duration histogram of the global
// providers, made again when a provider was replaced.
func current() (trace.Tracer, metric.Float64Histogram) {
	tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
	instruments.mu.Lock()
	defer instruments.mu.Unlock()
	if instruments.t == nil || instruments.tp != tp {
		instruments.t, instruments.tp = tp.Tracer(scope), tp
	}
	if instruments.h == nil || instruments.mp != mp {
		// Creation fails only for an invalid name; the SDK still returns a
		// usable no-op instrument then.
		instruments.h, _ = mp.Meter(scope).Float64Histogram(metricDuration, metric.WithUnit("s"),
			metric.WithDescription("Time an interceptor service took to handle a request, by service, hook and outcome."),
			metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
		instruments.mp = mp
	}
	return instruments.t, instruments.h
}

// observation is one request being handled.
type observation struct {
	span      trace.Span
	durations metric.Float64Histogram
	start     time.Time
	service   string
	hook      hooks.Hook
}

// observe starts the server span of a request on subject for hook h
// ("process <subject>", messaging conventions).
func (s *Service) observe(ctx context.Context, subject string, h hooks.Hook, runID string) (context.Context, *observation) {
	tracer, durations := current()
	ctx, span := tracer.Start(ctx, "process "+subject,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingConsumerGroupName(s.name),
			attrRunID.String(runID),
			attrService.String(s.name),
			attrHook.String(string(h)),
		))
	return ctx, &observation{span: span, durations: durations, start: time.Now(), service: s.name, hook: h}
}

// end records the request's outcome and ends its span.
func (o *observation) end(ctx context.Context, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(bub.AsError(err).Kind)
		o.span.RecordError(err)
		o.span.SetStatus(codes.Error, err.Error())
		o.span.SetAttributes(semconv.ErrorTypeKey.String(outcome))
	}
	// The attribute set (a sort and a hash) only when the histogram
	// records: the global provider's is a no-op until one is installed.
	if o.durations.Enabled(ctx) {
		o.durations.Record(ctx, time.Since(o.start).Seconds(), metric.WithAttributes(
			attrService.String(o.service), attrHook.String(string(o.hook)), attrOutcome.String(outcome)))
	}
	o.span.End()
}
