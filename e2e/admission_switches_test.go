package e2e

import (
	"strings"
	"testing"
)

// Bub's switches live on the tape, so ,tape.reset forgets them: after
// ,model echo:two and ,tape.reset the next turn runs the default model
// again, on whichever worker it lands (read-your-writes of the switches).
func TestTapeResetForgetsTheModelSwitch(t *testing.T) {
	s := startAdmissionStack(t, "process")
	session := "adm:reset"
	turn := func(content string) string {
		t.Helper()
		status, r := post(t, s.web, map[string]any{"content": content, "session_id": session}, "60s")
		if status != 200 || len(r.Outbounds) != 1 {
			t.Fatalf("%q: %d %+v", content, status, r)
		}
		return r.Outbounds[0].Content
	}
	if got := turn(",model echo:two"); !strings.Contains(got, "echo:two") {
		t.Fatalf(",model answered %q", got)
	}
	before := len(s.fake.Requests())
	turn("answered by echo")
	if n := len(s.fake.Requests()); n != before {
		t.Fatalf("the turn after ,model echo:two reached the default model (%d requests, want %d)", n, before)
	}
	turn(",tape.reset")
	turn("answered by the default model")
	reqs := s.fake.Requests()
	if len(reqs) != before+1 || reqs[len(reqs)-1].Model != "fake" {
		t.Fatalf("after ,tape.reset the model saw %d new requests (models %v), want one for fake", len(reqs)-before, icModels(reqs[before:]))
	}
}
