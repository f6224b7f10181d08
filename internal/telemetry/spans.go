package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/pkg/bub"
)

// ScopeName is the instrumentation scope of every span and instrument
// this package creates.
const ScopeName = "github.com/bubbus/bub"

// ns is the namespace of Bub's own attribute and metric names (bub.*).
const ns = "bub"

// Bub's own span and metric attributes (the standard ones come from the
// semantic conventions).
const (
	AttrRunID      = attribute.Key(ns + ".run.id")
	AttrSessionID  = attribute.Key(ns + ".session.id")
	AttrTurnStatus = attribute.Key(ns + ".turn.status")
	AttrDelivery   = attribute.Key(ns + ".delivery")
	AttrEntries    = attribute.Key(ns + ".tape.entries")
	AttrHook       = attribute.Key(ns + ".hook.name")
	AttrPlugin     = attribute.Key(ns + ".plugin")
	AttrDecision   = attribute.Key(ns + ".hook.decision")
	AttrStream     = attribute.Key(ns + ".stream")
	AttrConsumer   = attribute.Key(ns + ".consumer")
	AttrOutcome    = attribute.Key(ns + ".outcome")
	AttrService    = attribute.Key(ns + ".interceptor.service")
)

// messagingNATS is messaging.system for every NATS hop (the semantic
// conventions list no NATS value; custom values are allowed).
var messagingNATS = semconv.MessagingSystemKey.String("nats")

func tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// End ends span, recording err (when non-nil) as the span's error status.
func End(span trace.Span, err error) {
	Fail(span, err)
	span.End()
}

// Fail records err on span as its error status and error.type; nil does
// nothing.
func Fail(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
}

// errorType is a low-cardinality error.type: a Bub error's kind, else
// the error's Go type.
func errorType(err error) string {
	var be *bub.Error
	if errors.As(err, &be) && be.Kind != "" {
		return string(be.Kind)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return fmt.Sprintf("%T", err)
}

// ---------------------------------------------------------------------------
// HTTP (ingress).

// HTTPHandler wraps next, the handler of route (a ServeMux pattern such as
// "POST /v1/messages"), with an HTTP server span named route that
// continues a client's traceparent header, and records
// http.server.request.duration.
func HTTPHandler(route string, next http.Handler) http.Handler {
	method, path := route, route
	if m, p, ok := cut(route, ' '); ok {
		method, path = m, p
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer().Start(ctx, route,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				semconv.HTTPRequestMethodKey.String(method),
				semconv.HTTPRoute(path),
				semconv.URLPath(r.URL.Path),
				semconv.URLScheme(scheme(r)),
				semconv.UserAgentOriginal(r.UserAgent()),
			))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(sw.status)))
		}
		if m := instr(); m.httpDuration.Enabled(ctx) {
			m.httpDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
				semconv.HTTPRequestMethodKey.String(method), semconv.HTTPRoute(path),
				semconv.HTTPResponseStatusCode(sw.status)))
		}
	})
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// statusWriter remembers the status code; Unwrap keeps
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the wrapped writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ---------------------------------------------------------------------------
// Messaging (NATS hops).

// StartPublish starts the producer span of publishing message id to
// subject ("send <subject>"); its context is what the message carries.
func StartPublish(ctx context.Context, subject, id string) (context.Context, trace.Span) {
	return tracer().Start(ctx, "send "+subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(messagingNATS,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(id)))
}

// InterceptorCall starts the client span of one remote interceptor request
// to subject ("send <subject>"), for remote.WithCallSpan; the returned
// function ends it with the call's error.
func InterceptorCall(ctx context.Context, subject string) (context.Context, func(error)) {
	// The parent is the run's open chat or execute_tool span; the returned
	// context drops the run, so TraceContext names this span.
	ctx, span := tracer().Start(context.WithValue(contextOf(ctx), runKey{}, (*Agent)(nil)), "send "+subject,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(messagingNATS,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("request"),
			semconv.MessagingDestinationName(subject)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// StartReceive starts the consumer span of receiving message id on
// subject, a child of the trace context the message carried (h: its NATS
// headers). The caller ends it.
func StartReceive(ctx context.Context, h nats.Header, subject, id string) (context.Context, trace.Span) {
	return tracer().Start(ExtractNATS(ctx, h), "receive "+subject,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(messagingNATS,
			semconv.MessagingOperationTypeReceive,
			semconv.MessagingOperationName("receive"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(id)))
}

// Turn statuses ([TurnSpan.End]).
const (
	// TurnOK: the turn finished and its output is durably published.
	TurnOK = "ok"
	// TurnError: the turn failed (and was answered by on_error).
	TurnError = "error"
	// TurnRetry: infrastructure failed; the envelope is handed back.
	TurnRetry = "retry"
)

// Turn describes the delivery of one inbound envelope to a worker.
type Turn struct {
	// Traceparent and Tracestate are the inbound event's trace context.
	Traceparent, Tracestate string
	// Stream and Consumer name where the envelope came from.
	Stream, Consumer string
	// MessageID is the envelope id; SessionID the session it names
	// (before resolve_session).
	MessageID, SessionID string
	// Delivery counts deliveries (1 = first).
	Delivery uint64
}

// TurnSpan is a turn in progress: its consumer span and metrics.
type TurnSpan struct {
	span  trace.Span
	start time.Time
}

// StartTurn starts the consumer span of a turn ("process <stream>"), a
// child of the inbound event's trace context, and counts the turn as
// started.
func StartTurn(ctx context.Context, t Turn) (context.Context, *TurnSpan) {
	ctx = ContextWithTrace(ctx, t.Traceparent, t.Tracestate)
	ctx, span := tracer().Start(ctx, "process "+t.Stream,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(messagingNATS,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(t.Stream),
			semconv.MessagingConsumerGroupName(t.Consumer),
			semconv.MessagingMessageID(t.MessageID),
			semconv.GenAIConversationID(t.SessionID),
			AttrDelivery.Int64(int64(t.Delivery))))
	instr().turnsStarted.Add(ctx, 1)
	return ctx, &TurnSpan{span: span, start: time.Now()}
}

// End ends the turn with status (TurnOK, TurnError or TurnRetry) and its
// error, and records it in the turn metrics.
func (t *TurnSpan) End(ctx context.Context, status string, err error) {
	if m := instr(); m.turnsFinished.Enabled(ctx) {
		attrs := metric.WithAttributes(AttrTurnStatus.String(status))
		m.turnsFinished.Add(ctx, 1, attrs)
		m.turnDuration.Record(ctx, time.Since(t.start).Seconds(), attrs)
	}
	t.span.SetAttributes(AttrTurnStatus.String(status))
	End(t.span, err)
}

// StartCommit starts the span of a recorder commit of a run's events to
// its session's tape: a consumer span ("commit <session tape>") whose
// parent is the trace context of the run's last event that has one and
// which links to the distinct contexts of the others. headers are the
// events' NATS headers in run order.
func StartCommit(ctx context.Context, runID, session string, entries int, headers []nats.Header) (context.Context, trace.Span) {
	var parent trace.SpanContext
	var links []trace.Link
	seen := map[trace.SpanID]bool{}
	for i := len(headers) - 1; i >= 0; i-- {
		sc := trace.SpanContextFromContext(ExtractNATS(context.Background(), headers[i]))
		if !sc.IsValid() || seen[sc.SpanID()] {
			continue
		}
		seen[sc.SpanID()] = true
		if !parent.IsValid() {
			parent = sc
			continue
		}
		if len(links) < maxLinks {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return tracer().Start(ctx, "commit tape",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(messagingNATS,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("commit"),
			semconv.MessagingBatchMessageCount(len(headers)),
			AttrRunID.String(runID),
			AttrSessionID.String(session),
			AttrEntries.Int(entries)))
}

// maxLinks bounds the links of one commit span.
const maxLinks = 32
