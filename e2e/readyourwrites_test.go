package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// TestReadYourWritesAcrossWorkers sends two consecutive messages of one
// session to two different worker processes while the recorder is held
// back (it starts only once the second turn is waiting): the second turn
// waits for the recorder to commit the first, and its model request holds
// the first turn's messages.
func TestReadYourWritesAcrossWorkers(t *testing.T) {
	srv := natstest.Start(t)
	fake, base := fakellm.Start(t, fakellm.Script{})
	env := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x"}
	httpAddr := freeAddr(t)
	in := start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)

	workerA := start(t, "worker", env, "--workspace", t.TempDir())
	if status, r := post(t, web, map[string]any{"content": "remember the word kumquat", "session_id": "ryw"}, "30s"); status != 200 {
		t.Fatalf("first turn: %d %+v", status, r)
	}
	workerA.stop(t, 30*time.Second)

	start(t, "worker", env, "--workspace", t.TempDir())
	done := postAsync(t, web, "ryw", "which word?")
	_, js := srv.JetStream(t)
	waitHeld(t, js, 1)
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the second turn called the model (%d requests) before the recorder committed the first", n)
	}
	start(t, "recorder", env)

	r := <-done
	if len(r.Outbounds) != 1 {
		t.Fatalf("second turn: %+v", r)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2", len(reqs))
	}
	if !contains(reqs[1].Messages, "remember the word kumquat") {
		t.Fatalf("second request lacks the first turn:\n%+v", reqs[1].Messages)
	}
	in.stop(t, 30*time.Second)
}

// TestReadYourWritesAcrossOverlappingTurns: turns a and b of one session
// run at once (admission "process"). b, sent second, finishes first and is
// committed; then the recorder stops and a finishes. The session's next
// turn c must wait for a's commit (the recorder starts again only once c
// is waiting), and its model request holds a's messages. With the inbound
// sequence of the newest finished turn as the watermark, as before, c
// read the tape at once: b's commit had moved it past a's.
func TestReadYourWritesAcrossOverlappingTurns(t *testing.T) {
	srv := natstest.Start(t)
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Match: "slow", Echo: true, Delay: fakellm.Duration(3 * time.Second)}}})
	env := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x"}
	httpAddr := freeAddr(t)
	in := start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)
	start(t, "worker", env, "--workspace", t.TempDir())
	rec := start(t, "recorder", env)
	_, js := srv.JetStream(t)
	names := subjects.Default()
	store, err := tape.NewJetStreamStore(t.Context(), js, names, tape.WithoutProvisioning())
	if err != nil {
		t.Fatal(err)
	}
	const session = "ryw:overlap"

	// A first turn bootstraps the tape (its session/start anchor); two
	// overlapping first turns would each anchor it, and the later commit's
	// anchor would hide the other turn from the context.
	if status, r := post(t, web, map[string]any{"content": "hello", "session_id": session}, "30s"); status != 200 || len(r.Outbounds) != 1 {
		t.Fatalf("first turn: %d %+v", status, r)
	}
	a := postAsync(t, web, session, "slow: remember the word kumquat")
	eventually(t, 30*time.Second, func() (bool, string) {
		return len(fake.Requests()) == 2, "a has not reached the model"
	})
	if status, r := post(t, web, map[string]any{"content": "quick: what is 2+2?", "session_id": session}, "30s"); status != 200 || len(r.Outbounds) != 1 {
		t.Fatalf("b: %d %+v", status, r)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		entries, err := store.Fetch(t.Context(), session, tape.All())
		return err == nil && hasUserText(entries, "what is 2+2?"), fmt.Sprintf("b not committed: %d entries, %v", len(entries), err)
	})
	rec.stop(t, 30*time.Second)
	if r := <-a; len(r.Outbounds) != 1 {
		t.Fatalf("a: %+v", r)
	}

	c := postAsync(t, web, session, "which word?")
	waitHeld(t, js, 1)
	time.Sleep(time.Second) // c would have asked the model by now
	if n := len(fake.Requests()); n != 3 {
		t.Fatalf("c called the model (%d requests) before the recorder committed a", n)
	}
	start(t, "recorder", env)
	if r := <-c; len(r.Outbounds) != 1 {
		t.Fatalf("c: %+v", r)
	}
	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model saw %d requests, want 4", len(reqs))
	}
	for _, text := range []string{"remember the word kumquat", "what is 2+2?"} {
		if !contains(reqs[3].Messages, text) {
			t.Errorf("c's request lacks %q:\n%+v", text, reqs[3].Messages)
		}
	}
	in.stop(t, 30*time.Second)
}

// waitHeld waits until the workers hold n inbound messages (turns taken,
// not yet acknowledged).
func waitHeld(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	cons, err := js.Consumer(t.Context(), subjects.Default().InboundStream(), subjects.Default().WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		info, err := cons.Info(t.Context())
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == n, fmt.Sprintf("the workers hold %d messages", info.NumAckPending)
	})
}

// hasUserText reports whether a user message entry contains text.
func hasUserText(entries []tape.Entry, text string) bool {
	for _, e := range entries {
		if e.Kind == tape.KindMessage && e.Payload["role"] == "user" && strings.Contains(fmt.Sprint(e.Payload["content"]), text) {
			return true
		}
	}
	return false
}

func contains(msgs []llm.Message, text string) bool {
	for _, m := range msgs[:len(msgs)-1] {
		if strings.Contains(m.Content.PlainText(), text) {
			return true
		}
	}
	return false
}

// TestCommandsAndTurnsAlternateWithoutStaleWaits posts, in one session of
// `bub up`, comma commands and ordinary turns in turn (issue 14's
// reproduction): a command's run must move the read-your-writes
// watermark, so no turn waits out the worker's 5 s bound. Each post gets
// a 2.5 s context deadline, and no dev.bub.tape.stale.v1 event may be
// published.
func TestCommandsAndTurnsAlternateWithoutStaleWaits(t *testing.T) {
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	up := start(t, "bub", []string{"BUB_HOME=" + t.TempDir()}, "up", "--http", httpAddr, "--nats-listen", natsAddr)
	base := "http://" + httpAddr
	waitHTTP(t, base+"/readyz", 30*time.Second)
	seen := watchEvents(t, "nats://"+natsAddr)

	// The first post bootstraps the session's tape; warm it outside the
	// bound with a command, so the first bounded post already follows one.
	if status, r := post(t, base, map[string]any{"content": ",tape.info", "session_id": "ryw:cmd"}, "30s"); status != 200 {
		t.Fatalf("warm-up ,tape.info: %d %+v", status, r)
	}
	for _, line := range []string{"hello", "hello2", ",help", "hi", ",tape.info", "bye"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		status, r, err := postCtx(ctx, base, map[string]any{"content": line, "session_id": "ryw:cmd"}, "30s")
		cancel()
		if err != nil {
			t.Fatalf("%q did not answer within 2.5s (the read-your-writes bound is 12s): %v", line, err)
		}
		if status != 200 || len(r.Outbounds) != 1 {
			t.Fatalf("%q: %d %+v", line, status, r)
		}
	}
	seen.mu.Lock()
	stale := seen.byType[events.TypeTapeStale]
	seen.mu.Unlock()
	if stale != 0 {
		t.Fatalf("%d tape.stale events: a turn waited for a watermark that a command's run never moved", stale)
	}
	up.stop(t, 30*time.Second)
}

// TestRecordedSessionTurnReadsItsIndexOnce: a turn in a session whose
// earlier turns are recorded reads the tape's index when it starts (beside
// the newest run end, to see that nothing is left to wait for), and its run
// starts from that read, its context read too: the turn's JetStream
// direct gets of the index are that read, then the recorder's one before
// the commit. The model switches come with that index: no turn,
// the session's first included, reads them from the state bucket. Counted
// on the server's API subjects while turns run and are recorded in `bub
// up`.
func TestRecordedSessionTurnReadsItsIndexOnce(t *testing.T) {
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	up := start(t, "bub", []string{"BUB_HOME=" + t.TempDir()}, "up", "--http", httpAddr, "--nats-listen", natsAddr)
	base := "http://" + httpAddr
	waitHTTP(t, base+"/readyz", 30*time.Second)
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const session = "ryw:reads"
	names := subjects.Default()
	commits, err := nc.SubscribeSync(names.TapeIndex(session))
	if err != nil {
		t.Fatal(err)
	}
	reads, err := nc.SubscribeSync(names.DirectGet("", names.TapesStream()) + "." + names.TapeIndex(session))
	if err != nil {
		t.Fatal(err)
	}
	switchReads, err := nc.SubscribeSync(names.DirectGet("", names.KVStream(names.StateBucket())) + "." + names.KVKeySubject(names.StateBucket(), names.SwitchesKey(session)))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// turn posts one line and returns once the recorder committed its run
	// (published the tape's next index), and the index reads made meanwhile.
	turn := func(line string) int {
		t.Helper()
		if status, r := post(t, base, map[string]any{"content": line, "session_id": session}, "30s"); status != 200 || len(r.Outbounds) != 1 {
			t.Fatalf("%q: %d %+v", line, status, r)
		}
		if _, err := commits.NextMsg(30 * time.Second); err != nil {
			t.Fatalf("%q was not committed: %v", line, err)
		}
		n, _, err := reads.Pending()
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := reads.NextMsg(time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	turn("hello")
	for _, line := range []string{"hello again", "and again"} {
		if n := turn(line); n != 2 {
			t.Fatalf("%q: the tape's index was read %d times, want 2 (the turn's start, the recorder's commit)", line, n)
		}
	}
	if n, _, err := switchReads.Pending(); err != nil || n != 0 {
		t.Fatalf("the turns read the model switches from the state bucket %d times (%v), want 0", n, err)
	}
	up.stop(t, 30*time.Second)
}
