package telemetry

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/telemetry/telemetrytest"
	"github.com/bubbus/bub/pkg/subjects"
)

// restoreGlobals puts the global providers back after a test that calls
// Setup.
func restoreGlobals(t *testing.T) {
	t.Helper()
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
}

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestSetupWithoutConfigurationExportsNothing(t *testing.T) {
	restoreGlobals(t)
	tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
	shutdown, err := Setup(t.Context(), "worker", withGetenv(env(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != tp || otel.GetMeterProvider() != mp {
		t.Fatal("Setup installed providers although nothing is configured")
	}
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestSetupOTLPEndpointEnablesTraces: an OTLP endpoint alone turns trace
// export on (autoexport's default exporter, otlp); "none" turns it off.
func TestSetupOTLPEndpointEnablesTraces(t *testing.T) {
	restoreGlobals(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // never reached: no span is exported
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	shutdown, err := Setup(t.Context(), "worker", withGetenv(env(map[string]string{envOTLPEndpoint: "http://127.0.0.1:1"})))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok {
		t.Fatalf("tracer provider %T, want the SDK's", otel.GetTracerProvider())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx)

	restoreGlobals(t)
	before := otel.GetTracerProvider()
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	shutdown, err = Setup(t.Context(), "worker", withGetenv(env(map[string]string{envTracesExporter: "none", envMetricsExporter: "none"})))
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("OTEL_TRACES_EXPORTER=none installed a provider")
	}
	_ = shutdown(t.Context())
}

func TestResourceServiceName(t *testing.T) {
	res, err := newResource(t.Context(), "recorder", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.String(); !strings.Contains(got, "service.name=recorder") || !strings.Contains(got, "service.instance.id=r-1") {
		t.Fatalf("resource %s", got)
	}
	t.Setenv("OTEL_SERVICE_NAME", "custom")
	res, err = newResource(t.Context(), "recorder", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.String(); !strings.Contains(got, "service.name=custom") {
		t.Fatalf("OTEL_SERVICE_NAME does not win: %s", got)
	}
}

// TestMetricsEndpoint serves /metrics and /healthz and finds a turn
// counted by StartTurn in the Prometheus exposition, beside the process's
// and the Go runtime's metrics.
func TestMetricsEndpoint(t *testing.T) {
	restoreGlobals(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shutdown, err := Setup(t.Context(), "worker", withGetenv(env(nil)), withMetricsListener(ln))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	ctx, turn := StartTurn(t.Context(), Turn{Stream: "S", Consumer: "c", MessageID: "m"})
	turn.End(ctx, TurnOK, nil)

	base := "http://" + ln.Addr().String()
	if body := get(t, base+"/healthz"); !strings.Contains(body, "ok") {
		t.Fatalf("/healthz: %s", body)
	}
	body := get(t, base+"/metrics")
	for _, want := range []string{`bub_turns_started_total`, `bub_turns_finished_total{bub_turn_status="ok"`, `bub_turn_duration_seconds_bucket`, `service_name="worker"`,
		"\nprocess_resident_memory_bytes ", "\nprocess_cpu_seconds_total ", "\ngo_goroutines ", "\ngo_memstats_heap_inuse_bytes ", "\ngo_gc_duration_seconds_count "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

// TestPprofOnlyWhenAskedFor: /debug/pprof/ is served on the metrics
// address with BUB_PPROF=true, and is a 404 without it.
func TestPprofOnlyWhenAskedFor(t *testing.T) {
	for _, on := range []bool{false, true} {
		restoreGlobals(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{}
		if on {
			vars[EnvPprof] = "true"
		}
		shutdown, err := Setup(t.Context(), "worker", withGetenv(env(vars)), withMetricsListener(ln))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "goroutine profile")
		if served != on {
			t.Errorf("BUB_PPROF=%v: /debug/pprof/goroutine answered %d (%.60s)", on, resp.StatusCode, body)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// TestObserveJetStream reads consumer lag and the dead-letter count from a
// real JetStream.
func TestObserveJetStream(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := srv.JetStream(t)
	names := subjects.Default()
	if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := nc.Publish(names.Inbound("http"), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(t.Context(), names.DLQ("invalid"), []byte("bad")); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	restoreGlobals(t)
	otel.SetMeterProvider(mp)
	stop, err := ObserveJetStream(js, []Consumer{{Stream: names.InboundStream(), Consumer: names.WorkerConsumer()}}, names.DLQStream())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()

	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := gauges(t, reader)
		return got[MetricConsumerPending] == 3 && got[MetricDLQMessages] == 1, fmt.Sprintf("gauges %v, want 3 pending and 1 dead letter", got)
	})
}

func gauges(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, m := range telemetrytest.Collect(t, reader) {
		if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
			for _, dp := range g.DataPoints {
				out[m.Name] += dp.Value
			}
		}
	}
	return out
}

// TestObserveInterceptors reports what the supplied function reads, one
// data point per service and outcome, and registers nothing without one.
func TestObserveInterceptors(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	restoreGlobals(t)
	otel.SetMeterProvider(mp)
	stop, err := ObserveInterceptors(nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = stop()
	calls := map[string]uint64{"ok": 3, "timeout": 1}
	stop, err = ObserveInterceptors(func() []InterceptorCalls {
		return []InterceptorCalls{{Service: "guard", ByOutcome: calls}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	got := map[string]int64{}
	for _, m := range telemetrytest.Collect(t, reader) {
		if m.Name != MetricInterceptorCalls {
			continue
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			svc, _ := dp.Attributes.Value(AttrService)
			out, _ := dp.Attributes.Value(AttrOutcome)
			got[svc.AsString()+"/"+out.AsString()] = dp.Value
		}
	}
	if len(got) != 2 || got["guard/ok"] != 3 || got["guard/timeout"] != 1 {
		t.Fatalf("%s points %v, want guard/ok=3 and guard/timeout=1", MetricInterceptorCalls, got)
	}
}
