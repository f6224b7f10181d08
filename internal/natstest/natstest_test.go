package natstest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestStartServesJetStream(t *testing.T) {
	s := Start(t)
	_, js := s.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	ack, err := js.Publish(ctx, "t.x", []byte("hello"))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if ack.Sequence != 1 {
		t.Fatalf("sequence = %d, want 1", ack.Sequence)
	}
}
