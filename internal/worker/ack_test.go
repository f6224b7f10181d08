package worker

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
)

// TestDoubleAckRidesOutAServerRestart: a finished turn's acknowledgement
// sent while the consumer's server is gone (as during an election, when
// nobody answers) is sent again until the server confirms it, so the
// finished turn is not redelivered after the ack wait.
func TestDoubleAckRidesOutAServerRestart(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t, natstest.Reconnecting...)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("turn")); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg := <-batch.Messages()
	if msg == nil {
		t.Fatalf("no message: %v", batch.Error())
	}
	s.Shutdown()
	s.WaitForShutdown()
	done := make(chan error, 1)
	go func() { done <- doubleAck(ctx, msg) }()
	time.Sleep(500 * time.Millisecond)
	s.Restart(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ack after the restart: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("doubleAck did not return")
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Fatalf("ack pending %d, ack floor %d: the ack did not land", info.NumAckPending, info.AckFloor.Stream)
	}
}
