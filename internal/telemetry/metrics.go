package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/pkg/hooks"
)

// Metric names. The gen_ai.* ones are the GenAI semantic conventions'
// client metrics; the bub.* ones are Bub's.
const (
	MetricTurnsStarted      = ns + ".turns.started"
	MetricTurnsFinished     = ns + ".turns.finished"
	MetricTurnDuration      = ns + ".turn.duration"
	MetricHookDecisions     = ns + ".hook.decisions"
	MetricHookDuration      = ns + ".hook.duration"
	MetricInterceptorCalls  = ns + ".interceptor.calls"
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricOperationDuration = "gen_ai.client.operation.duration"
	MetricHTTPDuration      = "http.server.request.duration"
	MetricConsumerPending   = ns + ".consumer.pending"
	MetricConsumerAck       = ns + ".consumer.ack_pending"
	MetricConsumerWaiting   = ns + ".consumer.waiting"
	MetricDLQMessages       = ns + ".dlq.messages"
)

// instruments are the synchronous instruments of one meter provider.
type instruments struct {
	turnsStarted  metric.Int64Counter
	turnsFinished metric.Int64Counter
	turnDuration  metric.Float64Histogram
	hookDecisions metric.Int64Counter
	hookDuration  metric.Float64Histogram
	tokenUsage    metric.Int64Histogram
	opDuration    metric.Float64Histogram
	httpDuration  metric.Float64Histogram
}

// cache holds the instruments of the current global meter provider; they
// are rebuilt when [Setup] (or a test) installs another one.
var cache struct {
	mu sync.Mutex
	mp metric.MeterProvider
	in *instruments
}

func instr() *instruments {
	mp := otel.GetMeterProvider()
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cache.in == nil || cache.mp != mp {
		cache.in, cache.mp = newInstruments(mp.Meter(ScopeName)), mp
	}
	return cache.in
}

// Bucket boundaries the GenAI conventions advise.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	hookBuckets     = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
)

// newInstruments creates the instruments on m. Instrument creation only
// fails on invalid names, which are constants here, so errors are dropped
// (the SDK returns a working no-op instrument with them).
func newInstruments(m metric.Meter) *instruments {
	in := &instruments{}
	in.turnsStarted, _ = m.Int64Counter(MetricTurnsStarted, metric.WithUnit("{turn}"),
		metric.WithDescription("Turns a worker started (one per delivery of an inbound envelope)."))
	in.turnsFinished, _ = m.Int64Counter(MetricTurnsFinished, metric.WithUnit("{turn}"),
		metric.WithDescription("Turns a worker finished, by bub.turn.status (ok, error, retry)."))
	in.turnDuration, _ = m.Float64Histogram(MetricTurnDuration, metric.WithUnit("s"),
		metric.WithDescription("Wall time of a turn, by bub.turn.status."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.hookDecisions, _ = m.Int64Counter(MetricHookDecisions, metric.WithUnit("{decision}"),
		metric.WithDescription("before_llm_call/before_tool_call implementations that changed, stopped or failed a call, by hook, plugin and decision (failed = a failure that was skipped)."))
	in.hookDuration, _ = m.Float64Histogram(MetricHookDuration, metric.WithUnit("s"),
		metric.WithDescription("Latency of the hook implementations counted by bub.hook.decisions."),
		metric.WithExplicitBucketBoundaries(hookBuckets...))
	in.tokenUsage, _ = m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used per LLM call, by gen_ai.token.type."),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	in.opDuration, _ = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of LLM calls."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.httpDuration, _ = m.Float64Histogram(MetricHTTPDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of ingress HTTP requests."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	return in
}

// RecordDecision counts a hook decision record (the worker's decision
// observer calls it beside publishing the hook.decision event) and adds it
// as a span event to the call it decided on.
func RecordDecision(ctx context.Context, rec hooks.DecisionRecord) {
	attrs := []attribute.KeyValue{AttrHook.String(string(rec.Hook)), AttrPlugin.String(rec.Plugin), AttrDecision.String(string(rec.Verdict))}
	if m := instr(); m.hookDecisions.Enabled(ctx) {
		set := metric.WithAttributes(attrs...)
		m.hookDecisions.Add(ctx, 1, set)
		m.hookDuration.Record(ctx, rec.Duration.Seconds(), set)
	}
	span := trace.SpanFromContext(ctx)
	if a := runFrom(ctx); a != nil {
		if s := a.currentSpan(); s != nil {
			span = s
		}
	}
	if rec.Err != nil {
		attrs = append(attrs, attribute.String("error.message", rec.Err.Error()))
	}
	span.AddEvent("hook.decision", trace.WithAttributes(append(attrs, attribute.Int64(ns+".hook.duration_us", rec.Duration.Microseconds()))...))
}

// Consumer names a JetStream consumer whose lag [ObserveJetStream]
// reports.
type Consumer struct {
	Stream, Consumer string
}

// observeTimeout bounds the NATS requests of one metric collection.
const observeTimeout = 2 * time.Second

// ObserveJetStream registers gauges read from JetStream at each metric
// collection: for every consumer its pending (not yet delivered),
// ack-pending and waiting (open pull requests) counts, and, when
// dlqStream is not empty, the number of dead letters in it. The returned
// function unregisters them.
func ObserveJetStream(js jetstream.JetStream, consumers []Consumer, dlqStream string) (unregister func() error, err error) {
	m := otel.GetMeterProvider().Meter(ScopeName)
	pending, err1 := m.Int64ObservableGauge(MetricConsumerPending, metric.WithUnit("{message}"),
		metric.WithDescription("Messages of a JetStream consumer not yet delivered (consumer lag)."))
	ackPending, err2 := m.Int64ObservableGauge(MetricConsumerAck, metric.WithUnit("{message}"),
		metric.WithDescription("Messages of a JetStream consumer delivered and not yet acknowledged."))
	waiting, err3 := m.Int64ObservableGauge(MetricConsumerWaiting, metric.WithUnit("{request}"),
		metric.WithDescription("Open pull requests on a JetStream consumer (idle pullers)."))
	dlq, err4 := m.Int64ObservableGauge(MetricDLQMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Dead letters stored in the DLQ stream."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("telemetry: jetstream gauges: %w", err)
	}
	cb := func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, observeTimeout)
		defer cancel()
		var errs []error
		for _, c := range consumers {
			cons, err := js.Consumer(ctx, c.Stream, c.Consumer)
			if err != nil {
				errs = append(errs, fmt.Errorf("consumer %s/%s: %w", c.Stream, c.Consumer, err))
				continue
			}
			info := cons.CachedInfo()
			attrs := metric.WithAttributes(messagingNATS, AttrStream.String(c.Stream), AttrConsumer.String(c.Consumer),
				semconv.MessagingConsumerGroupName(c.Consumer))
			o.ObserveInt64(pending, int64(info.NumPending), attrs)
			o.ObserveInt64(ackPending, int64(info.NumAckPending), attrs)
			o.ObserveInt64(waiting, int64(info.NumWaiting), attrs)
		}
		if dlqStream != "" {
			s, err := js.Stream(ctx, dlqStream)
			if err != nil {
				errs = append(errs, fmt.Errorf("stream %s: %w", dlqStream, err))
			} else {
				o.ObserveInt64(dlq, int64(s.CachedInfo().State.Msgs), metric.WithAttributes(AttrStream.String(dlqStream)))
			}
		}
		return errors.Join(errs...)
	}
	reg, err := m.RegisterCallback(cb, pending, ackPending, waiting, dlq)
	if err != nil {
		return nil, fmt.Errorf("telemetry: jetstream gauges: %w", err)
	}
	return reg.Unregister, nil
}

// InterceptorCalls are the calls of one remote interceptor service so
// far, by outcome (ok, no_responders, timeout, malformed, remote_error,
// transport, cancelled).
type InterceptorCalls struct {
	Service   string
	ByOutcome map[string]uint64
}

// ObserveInterceptors registers bub.interceptor.calls, the calls of every
// remote interceptor by service and outcome, read from calls at each
// collection. Whoever wires the interceptors supplies calls (telemetry
// knows no plugin); nil registers nothing. The returned function
// unregisters it.
func ObserveInterceptors(calls func() []InterceptorCalls) (unregister func() error, err error) {
	if calls == nil {
		return func() error { return nil }, nil
	}
	m := otel.GetMeterProvider().Meter(ScopeName)
	counter, err := m.Int64ObservableCounter(MetricInterceptorCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Remote interceptor calls by service and outcome."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: interceptor counter: %w", err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, c := range calls() {
			for outcome, n := range c.ByOutcome {
				o.ObserveInt64(counter, int64(n), metric.WithAttributes(AttrService.String(c.Service), AttrOutcome.String(outcome)))
			}
		}
		return nil
	}, counter)
	if err != nil {
		return nil, fmt.Errorf("telemetry: interceptor counter: %w", err)
	}
	return reg.Unregister, nil
}
