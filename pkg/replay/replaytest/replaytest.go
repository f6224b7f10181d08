package replaytest

import (
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/replay"
)

// Run replays the Bub JSONL tape at path with plugins registered after the
// builtin plugin (the last has the highest priority) and fails t unless
// every turn replays identically; the report is logged either way. The
// session is named after the file. It returns the report for further
// checks.
func Run(t testing.TB, path string, plugins ...hooks.Plugin) replay.Report {
	t.Helper()
	rep, err := replay.File(t.Context(), path, replay.Options{Plugins: plugins, Workspace: t.TempDir()})
	if err != nil {
		t.Fatalf("replay %s: %v", path, err)
	}
	var b strings.Builder
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(rep.Results) == 0:
		t.Fatalf("replay %s: the tape holds no turn", path)
	case !rep.Identical():
		t.Errorf("replay %s differs from the recording:\n%s", path, b.String())
	default:
		t.Logf("replay %s:\n%s", path, b.String())
	}
	return rep
}
