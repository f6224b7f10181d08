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
	if err := s.Outage(t, 500*time.Millisecond, 30*time.Second, func() error { return doubleAck(ctx, msg) }); err != nil {
		t.Fatalf("ack after the restart: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Fatalf("ack pending %d, ack floor %d: the ack did not land", info.NumAckPending, info.AckFloor.Stream)
	}
}
