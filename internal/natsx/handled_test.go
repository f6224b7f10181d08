package natsx_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
)

// TestHandledWaitsForTheHandlerToCatchUp: after a Flush every message is
// in the client, not yet handled by a slow handler; Wait returns once the
// handler has handled them all.
func TestHandledWaitsForTheHandlerToCatchUp(t *testing.T) {
	srv := natstest.Start(t)
	sender, receiver := srv.Conn(t), srv.Conn(t)
	const msgs = 20
	var handledN atomic.Int64
	h := natsx.NewHandled()
	sub, err := receiver.Subscribe("deltas", h.Handler(func(*nats.Msg) {
		time.Sleep(5 * time.Millisecond)
		handledN.Add(1)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.Flush(); err != nil {
		t.Fatal(err)
	}
	sendDeltas(t, sender, receiver, msgs)
	if n := handledN.Load(); n == msgs {
		t.Fatalf("all %d handled right after the flush: the handler is not slow enough to show anything", n)
	}
	if err := h.Wait(sub); err != nil {
		t.Fatal(err)
	}
	if n := handledN.Load(); n != msgs {
		t.Fatalf("Wait returned with %d of %d handled", n, msgs)
	}
	_ = sub.Unsubscribe()
	if err := h.Wait(sub); err == nil {
		t.Fatal("Wait on a closed subscription: no error")
	}
}

// TestHandledWaitReturnsAfterEveryRound: one message, flush, Wait, many
// times over. nats.go (1.56) accounts a delivered message as no longer
// pending only after its handler returned, so the handler's last wake-up
// can come before the subscription's pending count reaches 0; Wait must
// still return.
func TestHandledWaitReturnsAfterEveryRound(t *testing.T) {
	srv := natstest.Start(t)
	sender, receiver := srv.Conn(t), srv.Conn(t)
	h := natsx.NewHandled()
	sub, err := receiver.Subscribe("deltas", h.Handler(func(*nats.Msg) { time.Sleep(100 * time.Microsecond) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.Flush(); err != nil {
		t.Fatal(err)
	}
	for round := range 500 {
		sendDeltas(t, sender, receiver, 1)
		done := make(chan error, 1)
		go func() { done <- h.Wait(sub) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Wait did not return within 5s (pending and delivered counts: %v)", round, pendingDelivered(sub))
		}
	}
}

func pendingDelivered(sub *nats.Subscription) [2]int64 {
	p, _, _ := sub.Pending()
	d, _ := sub.Delivered()
	return [2]int64{int64(p), d}
}

// sendDeltas publishes n messages on "deltas" from sender and flushes
// both connections, so that every one of them is in receiver's client.
func sendDeltas(t *testing.T, sender, receiver *nats.Conn, n int) {
	t.Helper()
	for range n {
		if err := sender.Publish("deltas", []byte("d")); err != nil {
			t.Fatal(err)
		}
	}
	if err := sender.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := receiver.Flush(); err != nil {
		t.Fatal(err)
	}
}
