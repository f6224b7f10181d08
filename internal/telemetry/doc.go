// Package telemetry is Bub's OpenTelemetry wiring: one trace
// per turn across every hop, and the metrics an operator watches.
//
// Start with [Setup], which every service calls once: it installs the
// global tracer and meter providers chosen by the standard OTEL_*
// environment (through go.opentelemetry.io/contrib/exporters/autoexport)
// and the W3C trace-context propagator, and optionally serves Prometheus
// /metrics on BUB_METRICS_ADDR. Without any OTEL_* exporter setting and
// without an OTLP endpoint nothing is exported, and trace context that
// arrives with a message is still passed on unchanged.
//
// How the trace travels (one trace per turn):
//
//   - ingress: [HTTPHandler] opens the server span of POST /v1/messages
//     (continuing a client's traceparent header); [StartPublish] opens the
//     producer span of the inbound publish, and [TraceContext] writes it
//     into the inbound CloudEvent's traceparent/tracestate extensions.
//   - worker: [StartTurn] continues the inbound event's context with the
//     consumer span of the turn; [Instrument] hooks an agent run's event bus
//     and opens invoke_agent, one `chat <model>` span per LLM call and one
//     `execute_tool <name>` span per tool call (OpenTelemetry GenAI
//     semantic conventions). Pass [TraceContext] to events.WithTraceContext
//     so every lifecycle CloudEvent carries the context of the span it
//     happened in, and to remote.WithTraceContext so interceptor requests
//     carry it in NATS headers.
//   - interceptor hosts pass [ContextWithTrace] to
//     interceptor.WithTraceContext; the host opens the server span.
//   - recorder: [StartCommit] opens a span per tape commit, a child of the
//     run's context and linked to the other events it commits.
//
// NATS headers are case-sensitive, so [InjectNATS] and [ExtractNATS] use
// a carrier that never canonicalises keys (propagation.HeaderCarrier
// would turn traceparent into Traceparent).
//
// Metrics (see metrics.go for the names): turns started and finished by
// status, turn duration, hook decisions and their latency by plugin,
// interceptor calls by outcome, gen_ai.client.token.usage and
// gen_ai.client.operation.duration, consumer lag of the inbound and
// recorder consumers and the dead-letter count ([ObserveJetStream]); on
// /metrics also the process collector's (process_resident_memory_bytes,
// process_cpu_seconds_total, process_open_fds) and the Go collector's
// (go_goroutines, go_memstats_*, go_gc_duration_seconds).
//
// Looking for where spans start? See internal/ingress (HTTP and publish),
// internal/worker (turn and agent run), internal/recorder (commit) and
// pkg/hooks/interceptor (interceptor server span).
package telemetry
