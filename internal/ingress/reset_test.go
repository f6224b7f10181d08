package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

// TestGatewayKeepsRepliesAcrossAConsumerReset: the gateway's consumer on
// the outbound stream (jsretry.Follow) is deleted before it delivered its first
// reply (as a leader change or a missed heartbeat does), and a reply is
// published before the gateway notices and recreates it. The recreated
// consumer starts where the first one did, so the reply still reaches its
// waiter. (With DeliverNew the recreated consumer would skip it.)
func TestGatewayKeepsRepliesAcrossAConsumerReset(t *testing.T) {
	f := setup(t, ingress.Config{})
	for i := range 20 {
		gw, err := ingress.NewGateway(f.nc, f.js, f.names, events.Source("ingress", "reset"), nil)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("reset-%d", i)
		await := gw.Expect(id)
		st, err := f.js.Stream(t.Context(), f.names.OutboundStream())
		if err != nil {
			t.Fatal(err)
		}
		for name := range st.ConsumerNames(t.Context()).Name() {
			// The consumer of the gateway closed last round may be gone
			// between the listing and the delete.
			if err := st.DeleteConsumer(t.Context(), name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Fatal(err)
			}
		}
		out := envelope.Envelope{ID: id + "-a", Content: "reply", InReplyTo: id, BatchSize: 1}
		oe, _ := events.New(events.TypeEnvelopeOutbound, events.Attrs{Source: "/bub/worker/test", SessionID: "s"}, out)
		m, _ := events.ToMsg(f.names.Outbound("http", "s"), oe)
		if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		outs, err := await(ctx)
		cancel()
		_ = gw.Close()
		if err != nil || len(outs) != 1 {
			t.Fatalf("round %d: replies %v, %v; want the one published while the consumer was gone", i, outs, err)
		}
	}
}
