package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
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
	done := make(chan reply, 1)
	go func() {
		_, r := post(t, web, map[string]any{"content": "which word?", "session_id": "ryw"}, "60s")
		done <- r
	}()
	_, js := srv.JetStream(t)
	cons, err := js.Consumer(context.Background(), subjects.Default().InboundStream(), subjects.Default().WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		info, err := cons.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 1, fmt.Sprintf("worker B holds %d messages", info.NumAckPending)
	})
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
