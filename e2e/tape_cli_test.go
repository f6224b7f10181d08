package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
)

// TestTapeCLIImportExportRoundTrip provisions the topology (a tape
// command alone refuses to create it), imports a tape written by Python Bub's
// file store (legacy timestamps, junk lines), exports it, imports the
// export into a second session and exports again: the two exports are
// byte-identical, and info/search/anchors/handoff/reset work on it.
func TestTapeCLIImportExportRoundTrip(t *testing.T) {
	srv := natstest.Start(t)
	nats := []string{"--nats", srv.URL}
	bub := func(args ...string) string { return run(t, "bub", nil, append(args, nats...)...) }

	// A tape command never creates the topology: on an empty server it
	// says what does.
	cmd := exec.Command(binary(t, "bub"), append([]string{"tape", "import", "py", "testdata/python-bub-tape.jsonl"}, nats...)...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "run `bub provision` first") {
		t.Fatalf("import before anything was provisioned: %v\n%s", err, out)
	}
	bub("provision")
	out := bub("tape", "import", "py", "testdata/python-bub-tape.jsonl")
	if !strings.Contains(out, "imported 5 entries") {
		t.Fatalf("import: %s", out)
	}
	first := bub("tape", "export", "py")
	if n := strings.Count(first, "\n"); n != 5 {
		t.Fatalf("export has %d lines:\n%s", n, first)
	}
	if !strings.Contains(first, `"date": "2025-01-01T00:00:00+00:00"`) || !strings.Contains(first, "Wie spät ist es? ☕") {
		t.Fatalf("legacy timestamp or non-ASCII text lost:\n%s", first)
	}
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	bub("tape", "import", "py2", path)
	if second := bub("tape", "export", "py2"); second != first {
		t.Fatalf("round trip changed the export:\n%s\nvs\n%s", first, second)
	}

	info := bub("tape", "info", "py")
	for _, want := range []string{"entries: 5", "anchors: 1", "last_anchor: session/start", "last_token_usage: 10", "last_token_cache_hit_rate: 37.50%"} {
		if !strings.Contains(info, want) {
			t.Fatalf("info lacks %q:\n%s", want, info)
		}
	}
	if got := bub("tape", "search", "py", "kaffee"); !strings.HasPrefix(got, "[tape.search]: 1 matches (0 filtered)") {
		t.Fatalf("search: %s", got)
	}
	if got := bub("tape", "list"); !strings.Contains(got, "py\npy2\n") {
		t.Fatalf("list: %q", got)
	}

	start(t, "recorder", []string{"BUB_NATS_URL=" + srv.URL})
	if got := bub("tape", "handoff", "py", "phase-1", "--summary", "coffee"); !strings.Contains(got, "anchor added: phase-1") {
		t.Fatalf("handoff: %s", got)
	}
	if got := bub("tape", "anchors", "py"); got != "- session/start\n- phase-1\n" {
		t.Fatalf("anchors: %q", got)
	}
	if got := bub("tape", "reset", "py", "--archive"); got != "ok\n" {
		t.Fatalf("reset: %q", got)
	}
	after := bub("tape", "show", "py")
	if strings.Contains(after, "Kaffee") || !strings.Contains(after, "archived") {
		t.Fatalf("reset did not empty and archive the tape:\n%s", after)
	}
}
