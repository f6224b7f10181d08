package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Environment variables Setup and the instrumentation read. The OTEL_*
// variables are the standard ones (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_TRACES_SAMPLER, …).
const (
	// EnvMetricsAddr is the listen address of the /metrics (Prometheus)
	// and /healthz endpoints, e.g. ":9464"; empty serves nothing.
	EnvMetricsAddr = "BUB_METRICS_ADDR"
	// EnvPprof set to "true" also serves Go's runtime profiles
	// (/debug/pprof/: heap, goroutine, profile, trace) on the metrics
	// address: a debugging aid, off by default.
	EnvPprof = "BUB_PPROF"
	// EnvCaptureContent, when "true", puts prompts, responses, tool
	// arguments and tool results on spans (off by default: they may hold
	// personal data).
	EnvCaptureContent = "BUB_OTEL_CAPTURE_CONTENT"

	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envMetricsExporter = "OTEL_METRICS_EXPORTER"
	envOTLPEndpoint    = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTraces      = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPMetrics     = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
)

// CaptureContent reports whether BUB_OTEL_CAPTURE_CONTENT enables content
// on spans (getenv is os.Getenv in production).
func CaptureContent(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(EnvCaptureContent)), "true")
}

// Option configures [Setup].
type Option func(*settings)

type settings struct {
	instance    string
	metricsAddr string
	metricsLn   net.Listener // tests: serve on this instead of metricsAddr
	getenv      func(string) string
	log         *slog.Logger
}

// WithInstance sets the service.instance.id resource attribute.
func WithInstance(id string) Option { return func(s *settings) { s.instance = id } }

// WithMetricsAddr serves Prometheus /metrics and a /healthz liveness
// endpoint on addr (see [EnvMetricsAddr]); empty serves nothing.
func WithMetricsAddr(addr string) Option { return func(s *settings) { s.metricsAddr = addr } }

// WithLogger sets the logger of exporter errors and of the metrics
// server; nil discards.
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.log = l } }

// withMetricsListener serves /metrics and /healthz on ln (tests).
func withMetricsListener(ln net.Listener) Option { return func(s *settings) { s.metricsLn = ln } }

// withGetenv replaces os.Getenv for the decisions Setup itself takes
// (tests); the exporters read the process environment.
func withGetenv(f func(string) string) Option { return func(s *settings) { s.getenv = f } }

// Setup installs OpenTelemetry for this process, which runs service
// (ingress, worker, recorder, interceptor or bub): the W3C trace-context
// propagator, a tracer provider and a meter provider whose exporters the
// OTEL_* environment chooses, with a resource whose service.name is
// OTEL_SERVICE_NAME or else service.
//
// Exporter choice: OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER take
// otlp, console or none (autoexport's names; metrics also prometheus).
// When one is unset, that signal is exported over OTLP if an OTLP endpoint
// is configured (OTEL_EXPORTER_OTLP_ENDPOINT or the per-signal variable)
// and not at all otherwise — unlike the SDK's default, a service started
// without any telemetry configuration never tries to reach a collector.
//
// The returned shutdown flushes and stops everything; call it once, after
// the services stopped (spans of their last work are exported then).
func Setup(ctx context.Context, service string, opts ...Option) (shutdown func(context.Context) error, err error) {
	s := settings{getenv: os.Getenv}
	for _, o := range opts {
		o(&s)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { s.log.Warn("otel.error", "err", err) }))

	res, err := newResource(ctx, service, s.instance)
	if err != nil {
		return nil, err
	}
	var closers []func(context.Context) error
	shutdown = func(ctx context.Context) error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i](ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func(context.Context) error, error) {
		return nil, errors.Join(err, shutdown(ctx))
	}

	if s.enabled(envTracesExporter, envOTLPTraces) {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return fail(fmt.Errorf("telemetry: trace exporter: %w", err))
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
			otel.SetTracerProvider(tp)
			closers = append(closers, tp.Shutdown)
		}
	}

	var readers []sdkmetric.Reader
	if s.enabled(envMetricsExporter, envOTLPMetrics) {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return fail(fmt.Errorf("telemetry: metric reader: %w", err))
		}
		if !autoexport.IsNoneMetricReader(r) {
			readers = append(readers, r)
		} else {
			_ = r.Shutdown(ctx)
		}
	}
	var promHandler http.Handler
	serve := s.metricsAddr != "" || s.metricsLn != nil
	if serve {
		// Beside Bub's metrics, what an operator expects of any Go
		// service: the process's resident memory, CPU and file
		// descriptors, and the Go runtime's goroutines, heap and GC.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := promexporter.New(promexporter.WithRegisterer(reg))
		if err != nil {
			return fail(fmt.Errorf("telemetry: prometheus exporter: %w", err))
		}
		readers = append(readers, exp)
		promHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if len(readers) > 0 {
		mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		for _, r := range readers {
			mopts = append(mopts, sdkmetric.WithReader(r))
		}
		mp := sdkmetric.NewMeterProvider(mopts...)
		otel.SetMeterProvider(mp)
		closers = append(closers, mp.Shutdown)
	}
	if serve {
		ln := s.metricsLn
		if ln == nil {
			if ln, err = net.Listen("tcp", s.metricsAddr); err != nil {
				return fail(fmt.Errorf("telemetry: metrics listen %s: %w", s.metricsAddr, err))
			}
		}
		closers = append(closers, serveMetrics(ln, promHandler, s.getenv(EnvPprof) == "true", s.log))
	}
	return shutdown, nil
}

// enabled reports whether a signal is exported: its OTEL_*_EXPORTER is
// set (autoexport then decides, "none" included), or an OTLP endpoint is.
func (s settings) enabled(exporterVar, signalEndpointVar string) bool {
	if s.getenv(exporterVar) != "" {
		return true
	}
	return s.getenv(envOTLPEndpoint) != "" || s.getenv(signalEndpointVar) != ""
}

// newResource describes the process: service.name (service, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise),
// service.instance.id, host and SDK attributes.
func newResource(ctx context.Context, service, instance string) (*resource.Resource, error) {
	attrs := resource.WithAttributes(semconv.ServiceName(service))
	if instance != "" {
		attrs = resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceInstanceID(instance))
	}
	res, err := resource.New(ctx,
		attrs,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // last: the environment wins
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil // a partial resource (one detector failed) is still useful
}

// serveMetrics serves /metrics (when h is set), /healthz and, with
// withPprof, the runtime profiles under /debug/pprof/ on ln until the
// returned stop is called.
func serveMetrics(ln net.Listener, h http.Handler, withPprof bool, log *slog.Logger) (stop func(context.Context) error) {
	addr := ln.Addr().String()
	mux := http.NewServeMux()
	if h != nil {
		mux.Handle("GET /metrics", h)
	}
	if withPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("telemetry.metrics_server_failed", "addr", addr, "err", err)
		}
	}()
	log.Info("telemetry.metrics_listening", "addr", addr)
	return func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		<-done
		return err
	}
}
