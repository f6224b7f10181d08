package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// shellWorker is the shell side of one worker: its own NATS connection,
// router, shells and builtin tools.
type shellWorker struct {
	router *shellRouter
	shells *toolkit.Shells
	reg    *tools.Registry
	ws     string
}

func newShellWorker(t *testing.T, srv *natstest.Server, instance string) *shellWorker {
	t.Helper()
	nc, js := srv.JetStream(t)
	names := subjects.Default()
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: names.StateBucket(), Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	r := &shellRouter{nc: nc, kv: kv, names: names, instance: instance, log: slog.New(slog.DiscardHandler)}
	shells, err := toolkit.NewShells(toolkit.WithRouter(r))
	if err != nil {
		t.Fatal(err)
	}
	r.shells = shells
	if err := r.serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.close()
		_ = shells.Close()
	})
	w := &shellWorker{router: r, shells: shells, reg: &tools.Registry{}, ws: t.TempDir()}
	if err := toolkit.Register(w.reg, toolkit.Options{Shells: shells}); err != nil {
		t.Fatal(err)
	}
	return w
}

// call runs a builtin tool on this worker and returns its text or error.
func (w *shellWorker) call(t *testing.T, name string, args map[string]any) (string, error) {
	t.Helper()
	tl, ok := w.reg.Get(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	res, berr := tools.Invoke(t.Context(), tl, &tools.Context{SessionID: "s", Workspace: w.ws}, args)
	if berr != nil {
		return "", fmt.Errorf("%s: %v", berr.Message, berr.Details["error"])
	}
	return res.(string), nil
}

var shellIDRE = regexp.MustCompile(`^started: (bash-[0-9a-f]{8})$`)

// background starts cmd in the background on w and returns its id.
func (w *shellWorker) background(t *testing.T, cmd string) string {
	t.Helper()
	out, err := w.call(t, "bash", map[string]any{"cmd": cmd, "background": true})
	if err != nil {
		t.Fatal(err)
	}
	m := shellIDRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("bash answered %q, want Bub's \"started: bash-<8 hex>\"", out)
	}
	return m[1]
}

// TestBackgroundShellsAnswerFromEveryWorker starts a background shell on
// one worker and reads and kills it through another: the calls reach the
// owner over bub.worker.<instance>.shell, and the shell id keeps Bub's
// format.
func TestBackgroundShellsAnswerFromEveryWorker(t *testing.T) {
	srv := natstest.Start(t)
	a, b := newShellWorker(t, srv, "w1"), newShellWorker(t, srv, "w2")
	id := a.background(t, "echo hello-from-w1; sleep 60")

	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, err := b.call(t, "bash.output", map[string]any{"shell_id": id})
		return err == nil && strings.Contains(out, "status: running") && strings.Contains(out, "hello-from-w1"), "bash.output through w2: " + out
	})
	out, err := b.call(t, "bash.kill", map[string]any{"shell_id": id})
	if err != nil || !strings.Contains(out, "id: "+id) || !strings.Contains(out, "status: exited") {
		t.Fatalf("bash.kill through w2: %q %v", out, err)
	}
	if n := a.shells.Len(); n != 0 {
		t.Fatalf("w1 still holds %d shells after the kill", n)
	}
	_, err = b.call(t, "bash.output", map[string]any{"shell_id": id})
	if err == nil || !strings.Contains(err.Error(), "unknown shell id: "+id) {
		t.Fatalf("bash.output of a killed shell: %v, want Bub's unknown shell id", err)
	}
	// A shell that exited is read (and forgotten) through the other worker.
	done := a.background(t, "echo finished")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, err := b.call(t, "bash.output", map[string]any{"shell_id": done})
		return err == nil && strings.Contains(out, "status: exited") && strings.Contains(out, "exit_code: 0"), "bash.output of an exited shell: " + out
	})
}

// TestBackgroundShellOfAGoneWorker stops answering on the owner (as when
// its worker died): the other worker's call fails with an error that says
// whose shell it is and that it is not running.
func TestBackgroundShellOfAGoneWorker(t *testing.T) {
	srv := natstest.Start(t)
	a, b := newShellWorker(t, srv, "w1"), newShellWorker(t, srv, "w2")
	id := a.background(t, "sleep 60")
	if err := a.router.close(); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"bash.output", "bash.kill"} {
		_, err := b.call(t, tool, map[string]any{"shell_id": id})
		want := "shell " + id + " belongs to worker w1, which is not running"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s of a gone worker's shell: %v, want %q", tool, err, want)
		}
	}
	// An id no worker ever claimed keeps Bub's error.
	if _, err := b.call(t, "bash.output", map[string]any{"shell_id": "bash-00000000"}); err == nil || !strings.Contains(err.Error(), "unknown shell id: bash-00000000") {
		t.Fatalf("bash.output of an unknown shell: %v", err)
	}
}

// FuzzDecodeShellRequest feeds arbitrary bytes to the routed-call decoder:
// it never panics, and what it accepts names an operation and a shell.
func FuzzDecodeShellRequest(f *testing.F) {
	f.Add([]byte(`{"op":"output","args":{"shell_id":"bash-1234abcd","offset":3}}`))
	f.Add([]byte(`{"op":"kill","args":{"shell_id":"bash-1234abcd"}}`))
	f.Add([]byte(`{"op":"rm","args":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeShellRequest(b)
		if err != nil {
			return
		}
		if req.Op != toolkit.ShellOutput && req.Op != toolkit.ShellKill {
			t.Fatalf("accepted op %q", req.Op)
		}
		if id, _ := req.Args["shell_id"].(string); id == "" {
			t.Fatalf("accepted a request without shell_id: %s", b)
		}
	})
}

// TestShellRouterClosesWhileCallsArrive: calls that arrive while the
// router closes are answered (or find no responder once it is gone),
// never left unanswered, and close waits for those being answered
// (before the fix close unsubscribed, dropping the calls NATS had
// delivered already, whose callers timed out).
func TestShellRouterClosesWhileCallsArrive(t *testing.T) {
	srv := natstest.Start(t)
	w := newShellWorker(t, srv, "w-closing")
	nc, _ := srv.JetStream(t)
	body, _ := json.Marshal(shellRequest{Op: toolkit.ShellOutput, Args: map[string]any{"shell_id": "bash-00000000"}})
	var (
		wg       sync.WaitGroup
		answered atomic.Int64
	)
	for range 32 {
		wg.Go(func() {
			for {
				// Published without waiting for the reply before the
				// next: many calls are pending at the router at once.
				msg, err := nc.Request(subjects.Default().WorkerShells("w-closing"), body, 5*time.Second)
				switch {
				case errors.Is(err, nats.ErrNoResponders):
					return // the router is gone
				case err != nil:
					t.Errorf("call unanswered: %v", err)
					return
				}
				var rep shellReply
				if jerr := json.Unmarshal(msg.Data, &rep); jerr != nil || rep.Error == "" {
					t.Errorf("reply %q, want the unknown shell's error", msg.Data)
				}
				answered.Add(1)
			}
		})
	}
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return answered.Load() >= 100, "fewer than 100 calls answered"
	})
	if err := w.router.close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
