package dlq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
)

// TestHoldOfABridgeEvent (failed before the fix): Writer.publish (dlq.go, the loop copying
// the original headers) copies every original header except Nats-Msg-Id,
// including the JetStream publish-expectation headers the server acts on.
// The events Bridge publishes every lifecycle event with
// jetstream.WithExpectStream(names.EventsStream()) (nats_bridge.go,
// NewBridge's pubOpts), which nats.go writes into the message as the header
// "Nats-Expected-Stream: BUB_EVENTS", and the server stores it with the
// message. When the recorder dead-letters such an event (lane.reject ->
// Writer.Reject, or Writer.Hold for an invalid event,
// internal/recorder/run.go), the copy to bub.dlq.<reason> carries
// "Nats-Expected-Stream: BUB_EVENTS" into the BUB_DLQ stream and the server
// refuses it ("expected stream does not match", err_code 10060). Hold
// fails every time, Reject Naks, the recorder NakWithDelay's and retries
// forever: the bad event is never dead-lettered (and its run never
// completes). The same holds for any other Nats-Expected-*, Nats-Rollup or
// Nats-TTL header on an original message.
//
// Expected: Hold of a message the Bridge published stores one letter
// (the server-interpreted Nats-* headers are dropped or renamed, as
// Nats-Msg-Id already is).
func TestHoldOfABridgeEvent(t *testing.T) {
	_, js, names := setup(t, natsx.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	br, err := events.NewBridge(js, names, events.Source("worker", "w1"))
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close(ctx)
	var bus events.Bus
	att := br.Attach(&bus)
	meta := events.Meta{State: bub.NewState(nil), RunID: "run-1", SessionID: "s:1"}
	if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: meta, Step: 1}); err != nil {
		t.Fatal(err)
	}
	if err := att.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w := dlq.NewWriter(js, names, nil)
	if err := w.Hold(ctx, m, dlq.ReasonInvalid, errors.New("bad event")); err != nil {
		t.Fatalf("Hold of an event the Bridge published: %v (original headers %v)", err, m.Headers())
	}
	letters, err := dlq.List(ctx, js, names, "")
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters %v (%v), want 1", letters, err)
	}
}
