package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestPublishRidesOutLeaderLoss: on a 3-server cluster with R3 streams,
// the server leading the inbound stream is shut down while clients post.
// Every POST is answered 202 or 503 jetstream_unavailable with a
// Retry-After (never publish_failed, never an error page); a client that
// posts again with the same id after a 503 is eventually accepted; and
// every accepted message is in the inbound stream exactly once.
func TestPublishRidesOutLeaderLoss(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	nc, js := c.JetStream(t)
	names, url := startClusterIngress(t, nc, js)
	const clients, perClient = 4, 30
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		retried  int
	)
	posted := make(chan struct{}, clients*perClient)
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Go(func() {
			for i := range perClient {
				id := fmt.Sprintf("c%d-%d", cl, i)
				body := fmt.Sprintf(`{"id":%q,"content":"hello","session_id":"s%d"}`, id, cl)
				for attempt := 0; ; attempt++ {
					if attempt == 20 {
						t.Errorf("%s: not accepted after 20 attempts", id)
						return
					}
					resp, err := http.Post(url, "application/json", strings.NewReader(body))
					if err != nil {
						t.Errorf("%s: %v", id, err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK {
						mu.Lock()
						accepted[id] = true
						mu.Unlock()
						break
					}
					secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
					if resp.StatusCode != http.StatusServiceUnavailable || err != nil || secs <= 0 {
						t.Errorf("%s: status %d Retry-After %q, want 202 or 503 with Retry-After", id, resp.StatusCode, resp.Header.Get("Retry-After"))
						return
					}
					mu.Lock()
					retried++
					mu.Unlock()
					time.Sleep(time.Duration(secs) * time.Second)
				}
				posted <- struct{}{}
			}
		})
	}
	for range clients * 5 { // some posts before the loss
		<-posted
	}
	leader := c.StreamLeader(t, js, names.InboundStream())
	t.Logf("shutting down %s, leader of %s", leader.Name(), names.InboundStream())
	leader.Shutdown()
	wg.Wait()
	if len(accepted) != clients*perClient {
		t.Fatalf("%d of %d messages accepted", len(accepted), clients*perClient)
	}
	t.Logf("%d messages accepted, %d POSTs answered 503 and posted again", len(accepted), retried)

	stored := map[string]int{}
	var (
		st   jetstream.Stream
		info *jetstream.StreamInfo
	)
	// the stream may still be electing its leader (the clients were done
	// before it)
	err := jsretry.Read(t.Context(), func(ctx context.Context) (err error) {
		if st, err = js.Stream(ctx, names.InboundStream()); err == nil {
			info, err = st.Info(ctx)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		stored[m.Header.Get(subjects.HeaderMsgID)]++
	}
	for id := range accepted {
		if stored[id] != 1 {
			t.Errorf("%s is stored %d times, want once", id, stored[id])
		}
	}
	if len(stored) != len(accepted) {
		t.Errorf("%d message ids stored, %d accepted", len(stored), len(accepted))
	}
	if info.State.Msgs != uint64(len(accepted)) {
		t.Errorf("the inbound stream holds %d messages, want %d", info.State.Msgs, len(accepted))
	}
}

// startClusterIngress provisions an R3 topology named "ride" through js
// and serves ingress over nc; it returns the names and the POST URL.
func startClusterIngress(t *testing.T, nc *nats.Conn, js jetstream.JetStream) (subjects.Names, string) {
	t.Helper()
	names, err := subjects.New("ride")
	if err != nil {
		t.Fatal(err)
	}
	if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{Replicas: 3, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	_, hs := serve(t, ingress.Config{}, nc, js, names)
	return names, hs.URL + "/v1/messages"
}

// TestPublishWithoutQuorum: with two of three servers gone the inbound
// stream has no quorum; a POST with ?wait=1s is retried for its second
// and then answered 503 jetstream_unavailable with Retry-After, not 202,
// and with the id the server gave the message, for the client's retry.
func TestPublishWithoutQuorum(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	nc, js := c.Servers[0].JetStream(t)
	_, url := startClusterIngress(t, nc, js)
	c.Servers[1].Shutdown()
	c.Servers[2].Shutdown()
	start := time.Now()
	resp, err := http.Post(url+"?wait=1s", "application/json", strings.NewReader(`{"content":"hello","session_id":"nq"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Code, ID string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusServiceUnavailable || body.Code != "jetstream_unavailable" || resp.Header.Get("Retry-After") != strconv.Itoa(ingress.RetryAfterSeconds) {
		t.Fatalf("status %d code %q Retry-After %q, want 503 jetstream_unavailable with Retry-After", resp.StatusCode, body.Code, resp.Header.Get("Retry-After"))
	}
	if body.ID == "" {
		t.Fatal("the 503 carries no id to retry with")
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Fatalf("answered after %v, want about the 1s wait", took)
	}
}
