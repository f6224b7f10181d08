package bubcmd

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			_, _ = w.Write([]byte(`{"status":"ready"}`))
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for _, tt := range []struct {
		path string
		ok   bool
	}{{"/readyz", true}, {"/other", false}} {
		cmd := newHealthcheck()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{srv.URL + tt.path})
		err := cmd.Execute()
		if (err == nil) != tt.ok {
			t.Errorf("%s: err %v, want ok=%v", tt.path, err, tt.ok)
		}
		if tt.ok && !strings.Contains(out.String(), "healthy: 200") {
			t.Errorf("%s: output %q", tt.path, out.String())
		}
	}
	cmd := newHealthcheck()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"http://127.0.0.1:1/healthz", "--timeout", "1s"})
	if err := cmd.Execute(); err == nil {
		t.Error("a closed port is healthy")
	}
}
