package fakellm

import (
	"net/http/httptest"
	"testing"
)

// Start validates script, serves it on a random 127.0.0.1 port until the
// test ends, and returns the server and its OpenAI base URL
// ("http://127.0.0.1:<port>/v1").
func Start(t testing.TB, script Script) (*Server, string) {
	t.Helper()
	if err := script.Validate(); err != nil {
		t.Fatalf("fakellm: %v", err)
	}
	s := New(script)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.CloseClientConnections() // ends handlers still waiting on a delay
		ts.Close()
	})
	return s, ts.URL + "/v1"
}
