package stack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
)

// TestEveryDeltaReachesASubscriberBeforeTheReply: the worker publishes
// token deltas on a connection of its own ("<name> deltas"), and a
// subscriber that has the turn's reply and flushed its own connection, and
// waited for its handler to catch up (as bub chat does before printing),
// has every delta of the run, in order.
func TestEveryDeltaReachesASubscriberBeforeTheReply(t *testing.T) {
	const chunks, rounds = 40, 5
	text := strings.Repeat("0123456789", chunks)
	c := stacktest.Start(t, stacktest.Options{Script: fakellm.Script{Steps: []fakellm.Step{{Text: text, Chunks: chunks, Repeat: true}}}})
	for round := range rounds {
		session := fmt.Sprintf("deltas:%d", round)
		var (
			mu  sync.Mutex
			got strings.Builder
			n   int
		)
		handled := natsx.NewHandled()
		sub, err := c.Conn.NC.Subscribe(c.Conn.Names.TokenStreamOf(session), handled.Handler(func(m *nats.Msg) {
			var d struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Data, &d); err != nil || d.Kind != "text" {
				t.Errorf("delta %q: %v", m.Data, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got.WriteString(d.Text)
			n++
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Conn.NC.Flush(); err != nil { // the subscription is in place
			t.Fatal(err)
		}
		outs := c.Turn(t, &envelope.Envelope{ID: fmt.Sprintf("delta-%d", round), Content: "hello", Channel: "test", SessionID: session})
		if err := c.Conn.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := handled.Wait(sub); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(outs) != 1 || outs[0].Content != text || n != chunks || got.String() != text {
			t.Errorf("round %d: %d replies, %d of %d deltas, text %q, want the reply's text %q", round, len(outs), n, chunks, got.String(), text)
		}
		mu.Unlock()
		_ = sub.Unsubscribe()
	}
	connz, err := c.NATS.Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var carried int64
	for _, ci := range connz.Conns {
		if strings.HasSuffix(ci.Name, " deltas") {
			carried += ci.InMsgs
		}
	}
	if carried != chunks*rounds {
		t.Errorf("the delta connections carried %d messages, want the %d deltas", carried, chunks*rounds)
	}
}
