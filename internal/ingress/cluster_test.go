package ingress_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/events"
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
	names, err := subjects.New("ride")
	if err != nil {
		t.Fatal(err)
	}
	if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{Replicas: 3, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	gw, err := ingress.NewGateway(nc, js, names, events.Source("ingress", "cluster-test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	srv, err := ingress.NewServer(ingress.Config{}, gw, func(context.Context) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

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
					resp, err := http.Post(hs.URL+"/v1/messages", "application/json", strings.NewReader(body))
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
	st, err := js.Stream(t.Context(), names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
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
