package app_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/examples/plugins/jsonltape"
	"github.com/bubbus/bub/pkg/app"
	"github.com/bubbus/bub/pkg/hooks"
)

// run runs the bub command in-process and returns its stdout.
func run(t *testing.T, plugins []hooks.Plugin, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := app.Run(ctx, args, app.Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut}, plugins...); err != nil {
		t.Fatalf("bub %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// TestTapeStorePlugin: with the JSONL store plugin, `bub run` (embedded
// NATS, a worker and the recorder in process) writes the turn's tape
// through the plugin's store, and `bub tape show` reads it back through
// the same hook; the JetStream tape stream stays empty.
func TestTapeStorePlugin(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	plugins := []hooks.Plugin{jsonltape.New(dir)}
	out := run(t, plugins, "run", "--home", home, "hello tapes")
	if !strings.Contains(out, "[cli:local]") || !strings.Contains(out, "hello tapes") {
		t.Fatalf("bub run printed %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cli%3Alocal.jsonl"))
	if err != nil {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("the JSONL store has no tape for cli:local (%v); the directory holds %v", err, entries)
	}
	if !bytes.Contains(b, []byte("hello tapes")) || !bytes.Contains(b, []byte(`"kind": "message"`)) {
		t.Errorf("the JSONL tape lacks the turn:\n%s", b)
	}
	shown := run(t, plugins, "tape", "show", "--home", home, "cli:local")
	if !strings.Contains(shown, "hello tapes") {
		t.Errorf("bub tape show through the plugin = %q", shown)
	}
	if bare := run(t, nil, "tape", "list", "--home", home); strings.Contains(bare, "cli:local") {
		t.Errorf("the JetStream store holds the tape too: %q", bare)
	}
}

// TestHooksListsPlugins: `bub hooks` of a build lists its plugin on the
// hook it implements, above the builtin.
func TestHooksListsPlugins(t *testing.T) {
	out := run(t, []hooks.Plugin{jsonltape.New(t.TempDir())}, "hooks", "--home", t.TempDir())
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "provide_tape_store ") {
			if !strings.Contains(l, "]: jsonltape") || !strings.Contains(l, "builtin") {
				t.Errorf("provide_tape_store line = %q", l)
			}
			return
		}
	}
	t.Errorf("no provide_tape_store line in:\n%s", out)
}
