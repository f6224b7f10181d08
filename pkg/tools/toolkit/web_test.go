package toolkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func newWebServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("method=" + r.Method + " accept=" + r.Header.Get("Accept") + " x=" + r.Header.Get("X-Test")))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("a", 100)))
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("caf\xe9"))
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func webFetch(t *testing.T, srv *httptest.Server, maxBytes int64) tools.Tool {
	t.Helper()
	for _, tl := range webTools(Options{HTTPClient: srv.Client(), MaxFetchBytes: maxBytes}) {
		if tl.Name == "web.fetch" {
			return tl
		}
	}
	t.Fatal("no web.fetch tool")
	return tools.Tool{}
}

func TestWebFetch(t *testing.T) {
	srv := newWebServer(t)
	fetchTool := webFetch(t, srv, 64)
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "default accept", args: map[string]any{"url": srv.URL + "/echo"}, want: "method=GET accept=text/markdown x="},
		{name: "headers override", args: map[string]any{"url": srv.URL + "/echo", "headers": map[string]any{"accept": "text/html", "X-Test": 1.0}}, want: "method=GET accept=text/html x=1"},
		{name: "body cap", args: map[string]any{"url": srv.URL + "/big"}, want: strings.Repeat("a", 64) + "\n\n[truncated: the response is longer than 64 bytes]"},
		{name: "invalid UTF-8", args: map[string]any{"url": srv.URL + "/latin1"}, want: "caf\uFFFD"},
	}
	for _, tt := range tests {
		res, err := tools.Invoke(t.Context(), fetchTool, nil, tt.args)
		if err != nil || res != tt.want {
			t.Errorf("%s: web.fetch = %q, %v; want %q", tt.name, res, err, tt.want)
		}
	}
}

func TestWebFetchErrors(t *testing.T) {
	srv := newWebServer(t)
	fetchTool := webFetch(t, srv, 0)
	tests := []struct {
		name    string
		args    map[string]any
		kind    bub.Kind
		details map[string]any // subset expected in the error details
	}{
		{name: "HTTP status", args: map[string]any{"url": srv.URL + "/missing"}, kind: bub.KindTool, details: map[string]any{"status": 404, "error": "404 Not Found for url " + srv.URL + "/missing"}},
		{name: "timeout", args: map[string]any{"url": srv.URL + "/hang", "timeout": 1}, kind: bub.KindTool},
		{name: "scheme", args: map[string]any{"url": "file:///etc/passwd"}, kind: bub.KindInvalidInput},
		{name: "relative", args: map[string]any{"url": "/echo"}, kind: bub.KindInvalidInput},
		{name: "unparsable", args: map[string]any{"url": "http://[::1"}, kind: bub.KindInvalidInput},
		{name: "headers type", args: map[string]any{"url": srv.URL, "headers": "x"}, kind: bub.KindInvalidInput},
	}
	for _, tt := range tests {
		_, err := tools.Invoke(t.Context(), fetchTool, nil, tt.args)
		if err == nil || err.Kind != tt.kind {
			t.Errorf("%s: error = %v, want kind %s", tt.name, err, tt.kind)
			continue
		}
		for k, v := range tt.details {
			if err.Details[k] != v {
				t.Errorf("%s: details[%s] = %v, want %v", tt.name, k, err.Details[k], v)
			}
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := tools.Invoke(ctx, fetchTool, nil, map[string]any{"url": srv.URL + "/echo"}); err == nil || err.Kind != bub.KindTool {
		t.Errorf("web.fetch with a cancelled context = %v", err)
	}
}
