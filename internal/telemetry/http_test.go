package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bubbus/bub/internal/telemetry/telemetrytest"
)

// TestHTTPHandler: one server span named by the route, and one
// http.server.request.duration point per request by method, route and
// status code.
func TestHTTPHandler(t *testing.T) {
	spans, reader := telemetrytest.UseProviders(t)
	h := HTTPHandler("POST /v1/messages", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	for _, target := range []string{"/v1/messages", "/v1/messages", "/v1/messages?fail=1"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, target, nil))
	}
	ended := spans.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want 3", len(ended))
	}
	if s := spanNamed(t, ended, "POST /v1/messages"); attr(s, "http.route").AsString() != "/v1/messages" {
		t.Errorf("http.route = %v", attr(s, "http.route"))
	}
	counts := map[int64]uint64{}
	for _, m := range telemetrytest.Collect(t, reader) {
		if m.Name != MetricHTTPDuration {
			continue
		}
		for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			method, _ := dp.Attributes.Value("http.request.method")
			route, _ := dp.Attributes.Value("http.route")
			code, _ := dp.Attributes.Value("http.response.status_code")
			if method.AsString() != "POST" || route.AsString() != "/v1/messages" {
				t.Errorf("point attributes %v", dp.Attributes.ToSlice())
			}
			counts[code.AsInt64()] += dp.Count
		}
	}
	if len(counts) != 2 || counts[200] != 2 || counts[503] != 1 {
		t.Errorf("request counts by status %v, want 200: 2, 503: 1", counts)
	}
}
