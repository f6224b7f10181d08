package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
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
