package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/pkg/tape"
)

func get(t *testing.T, url string, header http.Header) (int, map[string]any) {
	t.Helper()
	return call(t, http.MethodGet, url, header, nil)
}

// withTape provisions the tape store and writes session s1: an anchor,
// four messages (two of them mention "needle") and a second anchor.
func withTape(t *testing.T, f *fixture) {
	t.Helper()
	store, err := tape.NewJetStreamStore(context.Background(), f.js, f.names)
	if err != nil {
		t.Fatal(err)
	}
	entries := []tape.Entry{
		tape.Anchor("session/start", nil),
		tape.MessageEntry(map[string]any{"role": "user", "content": "find the needle"}),
		tape.MessageEntry(map[string]any{"role": "assistant", "content": "looking"}),
		tape.Anchor("handoff", map[string]any{"summary": "s"}),
		tape.MessageEntry(map[string]any{"role": "user", "content": "a NEEDLE again"}),
		tape.MessageEntry(map[string]any{"role": "assistant", "content": "done"}),
	}
	if _, err := store.Append(context.Background(), "s1", entries); err != nil {
		t.Fatal(err)
	}
}

func ids(t *testing.T, body map[string]any) []int {
	t.Helper()
	var out []int
	entries, _ := body["entries"].([]any)
	for _, e := range entries {
		out = append(out, int(e.(map[string]any)["id"].(float64)))
	}
	return out
}

func TestReadTapePages(t *testing.T) {
	f := setup(t, ingress.Config{})
	withTape(t, f)
	cases := []struct {
		query  string
		total  int
		offset int
		ids    []int
	}{
		{"", 6, 0, []int{1, 2, 3, 4, 5, 6}},
		{"?limit=2", 6, 4, []int{5, 6}}, // no offset: the newest page
		{"?offset=0&limit=2", 6, 0, []int{1, 2}},
		{"?offset=5&limit=2", 6, 5, []int{6}},
		{"?offset=9", 6, 6, nil},
		{"?q=needle", 2, 0, []int{2, 5}}, // case-insensitive
		{"?q=needle&offset=1&limit=1", 2, 1, []int{5}},
		{"?q=nothing+like+this", 0, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			status, body := get(t, f.srv.URL+"/v1/sessions/s1/tape"+tc.query, nil)
			if status != 200 {
				t.Fatalf("%d %v", status, body)
			}
			if int(body["total"].(float64)) != tc.total || int(body["offset"].(float64)) != tc.offset {
				t.Errorf("total %v offset %v, want %d %d", body["total"], body["offset"], tc.total, tc.offset)
			}
			if got := ids(t, body); !equal(got, tc.ids) {
				t.Errorf("entry ids %v, want %v", got, tc.ids)
			}
			anchors, _ := body["anchors"].([]any)
			if len(anchors) != 2 || anchors[1].(map[string]any)["name"] != "handoff" || anchors[1].(map[string]any)["position"] != 3.0 {
				t.Errorf("anchors %v, want session/start and handoff at position 3", anchors)
			}
		})
	}
	status, body := get(t, f.srv.URL+"/v1/sessions", nil)
	sessions, _ := body["sessions"].([]any)
	if status != 200 || len(sessions) != 1 {
		t.Fatalf("sessions: %d %v", status, body)
	}
	if s := sessions[0].(map[string]any); s["id"] != "s1" || s["entries"] != 6.0 || s["anchors"] != 2.0 || s["last_anchor"] != "handoff" {
		t.Errorf("session summary %v", s)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadAPIBadInput: every bad parameter is a 4xx with a code and a
// reason naming it.
func TestReadAPIBadInput(t *testing.T) {
	f := setup(t, ingress.Config{})
	// setup provisioned the tape stream with the rest of the topology
	if err := f.js.DeleteStream(t.Context(), f.names.TapesStream()); err != nil {
		t.Fatal(err)
	}
	status, body := get(t, f.srv.URL+"/v1/sessions", nil)
	if status != 503 || body["code"] != "tapes_unavailable" {
		t.Errorf("sessions before any tape store exists: %d %v, want 503 tapes_unavailable", status, body)
	}
	withTape(t, f)
	cases := []struct {
		path   string
		status int
		code   string
		reason string
	}{
		{"/v1/sessions/s1/tape?offset=-1", 400, "invalid_query", "offset"},
		{"/v1/sessions/s1/tape?offset=two", 400, "invalid_query", "offset"},
		{"/v1/sessions/s1/tape?limit=0", 400, "invalid_query", "limit"},
		{"/v1/sessions/s1/tape?limit=501", 400, "invalid_query", "limit"},
		{"/v1/sessions/s1/tape?limit=1e3", 400, "invalid_query", "limit"},
		{"/v1/sessions/s1/tape?q=" + strings.Repeat("x", 257), 400, "invalid_query", "q is longer"},
		{"/v1/sessions/nobody/tape", 404, "no_tape", "nobody"},
		{"/v1/hooks", 503, "no_worker", "no worker"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			status, body := get(t, f.srv.URL+tc.path, nil)
			msg, _ := body["error"].(string)
			if status != tc.status || body["code"] != tc.code || !strings.Contains(msg, tc.reason) {
				t.Fatalf("got %d %v, want %d %s with a reason mentioning %q", status, body, tc.status, tc.code, tc.reason)
			}
		})
	}
}

func TestReadStatus(t *testing.T) {
	f := setup(t, ingress.Config{})
	status, body := get(t, f.srv.URL+"/v1/status", nil)
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	streams, _ := body["streams"].([]any)
	names := map[string]bool{}
	for _, s := range streams {
		names[s.(map[string]any)["name"].(string)] = true
	}
	if !names[f.names.InboundStream()] || !names[f.names.DLQStream()] {
		t.Errorf("streams %v lack %s or %s", names, f.names.InboundStream(), f.names.DLQStream())
	}
	if _, ok := body["dead_letters"].(map[string]any); !ok {
		t.Errorf("no dead_letters in %v", body)
	}
}

// TestConsoleAndReadAPIAuth: with a token, every JSON read API needs it
// (the SSE tap too); the console's static files do not, since they hold
// no data and the page must load to ask for the token.
func TestConsoleAndReadAPIAuth(t *testing.T) {
	f := setup(t, ingress.Config{Token: "s3cret"})
	withTape(t, f)
	for _, path := range []string{"/v1/sessions", "/v1/sessions/s1/tape", "/v1/status", "/v1/hooks", "/v1/sessions/s1/events"} {
		if status, body := get(t, f.srv.URL+path, nil); status != 401 || body["code"] != "unauthorized" {
			t.Errorf("%s without a token: %d %v", path, status, body)
		}
	}
	auth := http.Header{"Authorization": {"Bearer s3cret"}}
	for _, path := range []string{"/v1/sessions", "/v1/sessions/s1/tape", "/v1/status"} {
		if status, body := get(t, f.srv.URL+path, auth); status != 200 {
			t.Errorf("%s with the token: %d %v", path, status, body)
		}
	}
	for path, ctype := range map[string]string{"/ui": "text/html", "/ui/": "text/html", "/ui/app.js": "javascript", "/ui/style.css": "text/css"} {
		resp, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), ctype)
		}
	}
	if resp, err := http.Get(f.srv.URL + "/ui/missing.js"); err != nil || resp.StatusCode != 404 {
		t.Errorf("missing console file: %v %v", resp, err)
	}
}
