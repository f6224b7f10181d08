package stack_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/tape"
)

// TestTurnThroughJetStreamDomain: the worker and the recorder run on a
// leaf node with a JetStream of its own and BUB_JS_DOMAIN naming the
// hub's domain. A turn is answered and recorded; every stream and bucket
// is in the hub, none in the leaf's own JetStream.
func TestTurnThroughJetStreamDomain(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{Domain: "hub", Script: fakellm.Script{Steps: []fakellm.Step{{Text: "from the hub"}}}})
	outs := c.Turn(t, &envelope.Envelope{ID: "leaf-1", Content: "hello", Channel: "test", ChatID: "leaf"})
	if len(outs) != 1 || outs[0].Content != "from the hub" {
		t.Fatalf("replies %+v, want one answer", outs)
	}
	var users int
	for _, e := range c.Tape(t, outs[0].SessionID) {
		if e.Kind == tape.KindMessage && e.Payload["role"] == "user" {
			users++
		}
	}
	if users != 1 {
		t.Errorf("%d user messages on the tape, want 1", users)
	}
	names := c.Conn.Names
	_, hubJS := c.Hub.JetStream(t)
	_, leafJS := c.NATS.JetStream(t) // the leaf's own domain
	for _, stream := range []string{names.InboundStream(), names.EventsStream(), names.TapesStream(), names.OutboundStream(), "KV_" + names.TurnsBucket()} {
		if _, err := hubJS.Stream(t.Context(), stream); err != nil {
			t.Errorf("hub: stream %s: %v", stream, err)
		}
		if _, err := leafJS.Stream(t.Context(), stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("leaf: stream %s: %v, want not found", stream, err)
		}
	}
}
