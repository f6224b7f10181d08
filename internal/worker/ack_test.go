package worker

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/jsretry"
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

// TestLastTurnRidesOutAStreamWithoutLeader: a turn's last-turn watermark
// whose first write meets "no responders" (here: the bucket's stream does
// not exist yet; during an election it has no leader) is written again
// until it is stored, once; a plain asynchronous publish would have lost
// it, and the next turn of the session would not wait for this one.
func TestLastTurnRidesOutAStreamWithoutLeader(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx := t.Context()
	p := lastTurnPut{js: js, subject: "$KV.late.s.last_turn", id: "last_turn:s:7", value: []byte("7")}
	f, err := p.start()
	select {
	case <-f.Ok():
		t.Fatal("stored without a stream")
	case err = <-f.Err():
	}
	if !jsretry.Transient(err) {
		t.Fatalf("first write: %v, want no responders or no response from the stream", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.await(ctx, f, nil, 100*time.Millisecond) }()
	time.Sleep(time.Second) // several retries fail
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write after the bucket appeared: %v", err)
	}
	e, err := kv.Get(ctx, "s.last_turn")
	if err != nil || string(e.Value()) != "7" || e.Revision() != 1 {
		t.Fatalf("watermark %v, %v: want 7 at revision 1", e, err)
	}
	// A copy of a write that was stored is not stored again.
	if err := p.await(ctx, f, nil, 0); err != nil {
		t.Fatal(err)
	}
	if st, _ := kv.Status(ctx); st.Values() != 1 {
		t.Fatalf("%d values, want 1 (the copy deduplicated)", st.Values())
	}
}
