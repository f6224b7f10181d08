package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestBubUpServesHTTPAndRecordsTheTape starts the all-in-one `bub up`,
// posts a message and waits for the echo reply, then reads the session's
// tape with `bub tape show` and finds the user and assistant messages.
func TestBubUpServesHTTPAndRecordsTheTape(t *testing.T) {
	home := t.TempDir()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	up := start(t, "bub", []string{"BUB_HOME=" + home}, "up", "--http", httpAddr, "--nats-listen", natsAddr, "--workers", "2")
	base := "http://" + httpAddr
	waitHTTP(t, base+"/readyz", 30*time.Second)

	status, r := post(t, base, map[string]any{"content": "hello bub", "session_id": "e2e:up"}, "30s")
	if status != 200 || len(r.Outbounds) != 1 {
		t.Fatalf("POST: %d %+v", status, r)
	}
	if got := r.Outbounds[0].Content; !strings.Contains(got, "hello bub") {
		t.Fatalf("echo reply %q does not contain the prompt", got)
	}
	if r.Outbounds[0].InReplyTo != r.ID {
		t.Fatalf("outbound answers %q, want %q", r.Outbounds[0].InReplyTo, r.ID)
	}

	natsURL := "nats://" + natsAddr
	waitTape(t, natsURL, "e2e:up", 2)
	out := run(t, "bub", nil, "tape", "show", "--nats", natsURL, "e2e:up")
	if !strings.Contains(out, "user: ") || !strings.Contains(out, "assistant: ") || !strings.Contains(out, "hello bub") {
		t.Fatalf("tape show lacks the turn's messages:\n%s", out)
	}
	up.stop(t, 30*time.Second)
}

// waitTape waits until a session's tape holds at least n message entries.
func waitTape(t *testing.T, natsURL, session string, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		out := run(t, "bub", nil, "tape", "show", "--json", "--nats", natsURL, session)
		return strings.Count(out, `"kind": "message"`) >= n, fmt.Sprintf("tape %s has fewer than %d messages:\n%s", session, n, out)
	})
}

// TestSeparateServicesFiftyMessagesTenSessions runs ingress, two workers
// and the recorder as separate processes against one NATS server, sends
// 50 messages over 10 sessions and expects exactly 50 replies and 100
// message entries on the tapes, while an independent subscriber checks
// that every lifecycle event is a valid CloudEvent.
func TestSeparateServicesFiftyMessagesTenSessions(t *testing.T) {
	srv := natstest.Start(t)
	env := []string{"BUB_NATS_URL=" + srv.URL}
	httpAddr := freeAddr(t)
	seen := watchEvents(t, srv.URL)
	start(t, "recorder", env)
	start(t, "worker", env, "--workspace", t.TempDir())
	start(t, "worker", env, "--workspace", t.TempDir())
	in := start(t, "ingress", env, "--http", httpAddr)
	base := "http://" + httpAddr
	waitHTTP(t, base+"/readyz", 30*time.Second)

	var wg sync.WaitGroup
	replies := make([]reply, 50)
	for i := range 50 {
		wg.Go(func() {
			status, r := post(t, base, map[string]any{
				"id": fmt.Sprintf("m-%02d", i), "content": fmt.Sprintf("message %d", i),
				"session_id": fmt.Sprintf("s-%d", i%10),
			}, "60s")
			if status != 200 {
				t.Errorf("message %d: %d %+v", i, status, r)
			}
			replies[i] = r
		})
	}
	wg.Wait()
	total := 0
	for i, r := range replies {
		total += len(r.Outbounds)
		if len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, fmt.Sprintf("message %d", i)) {
			t.Errorf("message %d got replies %+v", i, r.Outbounds)
		}
	}
	if total != 50 {
		t.Fatalf("got %d replies, want 50", total)
	}
	messages := 0
	for s := range 10 {
		session := fmt.Sprintf("s-%d", s)
		waitTape(t, srv.URL, session, 10)
		out := run(t, "bub", nil, "tape", "show", "--json", "--nats", srv.URL, session)
		messages += strings.Count(out, `"kind": "message"`)
	}
	if messages != 100 {
		t.Fatalf("tapes hold %d message entries, want 100", messages)
	}
	seen.check(t, 50)
	in.stop(t, 30*time.Second)
}

// eventWatch is an independent NATS subscriber on bub.events.>.
type eventWatch struct {
	mu     sync.Mutex
	byType map[string]int
	bad    []string
}

func watchEvents(t *testing.T, url string) *eventWatch {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &eventWatch{byType: map[string]int{}}
	_, err = nc.Subscribe(subjects.Default().EventsAll(), func(m *nats.Msg) {
		w.mu.Lock()
		defer w.mu.Unlock()
		ev, err := events.FromMsg(m)
		switch {
		case err != nil:
			w.bad = append(w.bad, fmt.Sprintf("%s: %v", m.Subject, err))
			return
		case !strings.HasPrefix(ev.Type(), "dev.bub.") || !strings.HasSuffix(ev.Type(), ".v1"):
			w.bad = append(w.bad, "unversioned type "+ev.Type())
		case ev.Subject() == "" || events.SessionID(ev) != ev.Subject():
			w.bad = append(w.bad, "no session subject on "+ev.ID())
		case subjects.Default().Event(ev.Subject(), events.SubjectName(ev.Type())) != m.Subject:
			w.bad = append(w.bad, fmt.Sprintf("%s published on %s", ev.Type(), m.Subject))
		case ev.DataContentType() != "application/json" || !strings.HasPrefix(ev.Source(), "/bub/"):
			w.bad = append(w.bad, "bad content type or source on "+ev.ID())
		case events.RunID(ev) != "" && events.Seq(ev) < 1:
			w.bad = append(w.bad, "run event without seq: "+ev.ID())
		}
		if _, err := events.DecodePayload(ev); err != nil {
			w.bad = append(w.bad, fmt.Sprintf("%s payload: %v", ev.Type(), err))
		}
		w.byType[ev.Type()]++
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// check expects runs events of each kind the skeleton emits per run.
func (w *eventWatch) check(t *testing.T, runs int) {
	t.Helper()
	want := []string{events.TypeRunStarted, events.TypeStepStarted, events.TypeLLMCallStarted, events.TypeLLMCallFinished,
		events.TypeChatFinished, events.TypeStepFinished, events.TypeRunFinished}
	eventually(t, 10*time.Second, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.bad) > 0 {
			t.Fatalf("invalid events: %v", w.bad)
		}
		for _, typ := range want {
			if w.byType[typ] < runs {
				return false, fmt.Sprintf("%s: %d of %d", typ, w.byType[typ], runs)
			}
		}
		return true, ""
	})
}

// TestBubUpExitsWhenAServiceFails starts `bub up` with a fail-closed
// interceptor that is not running: its worker cannot start (the
// standalone worker exits 1), so bub up stops the other services and
// exits non-zero, naming the failure, instead of running on with a port
// that accepts connections and never answers.
func TestBubUpExitsWhenAServiceFails(t *testing.T) {
	httpAddr := freeAddr(t)
	up := start(t, "bub", []string{"BUB_HOME=" + t.TempDir(), "BUB_INTERCEPTORS=guard", "BUB_INTERCEPTOR_GUARD_FAILURE=closed"},
		"up", "--http", httpAddr, "--nats-listen", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case <-up.Done():
	case <-ctx.Done():
		t.Fatalf("bub up still runs %v after its worker failed", 60*time.Second)
	}
	if up.Err() == nil {
		t.Fatal("bub up exited 0 after its worker failed")
	}
	out := up.Output()
	if !strings.Contains(out, `interceptor \"guard\" fails closed`) && !strings.Contains(out, `interceptor "guard" fails closed`) {
		t.Fatalf("bub up's output does not name the failure:\n%s", out)
	}
}

// TestBackgroundShellAcrossWorkers starts a background shell through
// `bub up --workers 2` and reads it with ,bash.output from eight sessions
// (which the two workers share out): every call reaches the worker that
// owns the shell, and ,bash.kill from anywhere stops it.
func TestBackgroundShellAcrossWorkers(t *testing.T) {
	httpAddr := freeAddr(t)
	up := start(t, "bub", []string{"BUB_HOME=" + t.TempDir()}, "up", "--http", httpAddr, "--nats-listen", "", "--workers", "2")
	base := "http://" + httpAddr
	waitHTTP(t, base+"/readyz", 30*time.Second)

	status, r := post(t, base, map[string]any{"content": `,bash "cmd=echo hello-cluster; sleep 120" background=true`, "session_id": "shell:0"}, "30s")
	if status != 200 || len(r.Outbounds) != 1 {
		t.Fatalf("starting the shell: %d %+v", status, r)
	}
	id, ok := strings.CutPrefix(strings.TrimSpace(r.Outbounds[0].Content), "started: ")
	if !ok {
		t.Fatalf("bash answered %q", r.Outbounds[0].Content)
	}
	for i := 1; i <= 8; i++ {
		status, r := post(t, base, map[string]any{"content": ",bash.output shell_id=" + id, "session_id": fmt.Sprintf("shell:%d", i)}, "30s")
		if status != 200 || len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, "id: "+id) {
			t.Fatalf("bash.output from session %d: %d %+v", i, status, r)
		}
	}
	status, r = post(t, base, map[string]any{"content": ",bash.kill shell_id=" + id, "session_id": "shell:9"}, "30s")
	if status != 200 || len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, "status: exited") {
		t.Fatalf("bash.kill: %d %+v", status, r)
	}
	up.stop(t, 30*time.Second)
}
