package interceptor_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bubbus/bub/internal/telemetry/telemetrytest"
)

// TestTelemetry: with providers installed (after Serve, as a process that
// sets up telemetry late would), each request is one server span and one
// bub.interceptor.server.duration point by service, hook and outcome.
func TestTelemetry(t *testing.T) {
	nc, subject := serveGuard(t)

	// One request before any provider: recorded nowhere.
	if _, err := nc.Request(subject, []byte(`{"hook": "before_tool_call", "input": {"call": {"tool": "ls"}}}`), natsTimeout); err != nil {
		t.Fatal(err)
	}
	spans, reader := telemetrytest.UseProviders(t)
	for _, body := range []string{
		`{"hook": "before_tool_call", "run_id": "r1", "input": {"call": {"tool": "ls"}}}`,
		`{"hook": "before_tool_call", "run_id": "r2", "input": {"call": {"tool": "ls"}}}`,
		`{"hook": "before_tool_call", "run_id": "r3", "input": {"call": {"tool": "boom"}}}`,
	} {
		if _, err := nc.Request(subject, []byte(body), natsTimeout); err != nil {
			t.Fatal(err)
		}
	}

	ended := spans.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans ended, want 3 (one per request after the provider was installed)", len(ended))
	}
	for i, sp := range ended {
		if sp.Name() != "process "+subject {
			t.Errorf("span %d named %q", i, sp.Name())
		}
		want := map[attribute.Key]string{
			"messaging.system": "nats", "messaging.destination.name": subject,
			"bub.interceptor.service": "guard", "bub.hook.name": "before_tool_call",
			"bub.run.id": []string{"r1", "r2", "r3"}[i],
		}
		got := map[attribute.Key]string{}
		for _, kv := range sp.Attributes() {
			got[kv.Key] = kv.Value.Emit()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, got[k], v)
			}
		}
	}

	counts := map[string]uint64{}
	for _, m := range telemetrytest.Collect(t, reader) {
		if m.Name != "bub.interceptor.server.duration" {
			continue
		}
		for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			svc, _ := dp.Attributes.Value("bub.interceptor.service")
			hook, _ := dp.Attributes.Value("bub.hook.name")
			outcome, _ := dp.Attributes.Value("bub.outcome")
			counts[svc.Emit()+"/"+hook.Emit()+"/"+outcome.Emit()] += dp.Count
		}
	}
	want := map[string]uint64{"guard/before_tool_call/ok": 2, "guard/before_tool_call/unknown": 1}
	if len(counts) != len(want) || counts["guard/before_tool_call/ok"] != 2 || counts["guard/before_tool_call/unknown"] != 1 {
		t.Errorf("duration points %v, want %v", counts, want)
	}
}
