package natsx

import (
	"context"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/subjects"
)

func TestEnsureTopologyIsIdempotent(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	n := subjects.Default()
	ctx := context.Background()
	for i := range 2 {
		if err := EnsureTopology(ctx, js, n, Topology{}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	for _, name := range []string{"BUB_INBOUND", "BUB_EVENTS", "BUB_OUTBOUND", "BUB_STEER", "BUB_DLQ"} {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	if _, err := js.Consumer(ctx, "BUB_INBOUND", "workers"); err != nil {
		t.Errorf("worker consumer: %v", err)
	}
	if _, err := js.KeyValue(ctx, "bub_turns"); err != nil {
		t.Errorf("turns bucket: %v", err)
	}
}
