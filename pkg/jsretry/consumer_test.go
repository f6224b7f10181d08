package jsretry_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/jsretry"
)

// TestConsumerRidesOutAServerRestart: binding a durable consumer while the
// only server is down fails with one attempt; jsretry.Consumer, started
// then, binds it once the server is back.
func TestConsumerRidesOutAServerRestart(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t, natstest.Reconnecting...)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d"}); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	octx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := js.Consumer(octx, "S", "d")
	cancel()
	if err == nil {
		t.Fatal("one attempt bound the consumer with the server down")
	}
	var cons jetstream.Consumer
	if rerr := s.Outage(t, 500*time.Millisecond, jsretry.ReadBound+5*time.Second, func() (err error) {
		cons, err = jsretry.Consumer(ctx, js, "S", "d")
		return err
	}); rerr != nil {
		t.Fatalf("after the restart: %v (first attempt: %v)", rerr, err)
	}
	if name := cons.CachedInfo().Name; name != "d" {
		t.Fatalf("bound %q, want d", name)
	}
}
