package worker

import (
	"context"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/envelope"
)

// Only the turn-failure reply of the turn's own inbound envelope is held
// back (until the turn's outcome is known); other replies, and any reply
// sent outside a turn, go out at once.
func TestHoldFailureReply(t *testing.T) {
	tr := &turn{envelope: "in-1"}
	ctx := withTurn(t.Context(), tr)
	tests := []struct {
		name string
		ctx  context.Context
		env  *envelope.Envelope
		held bool
	}{
		{"the turn's failure reply", ctx, &envelope.Envelope{ID: "in-1/error/turn", Kind: envelope.KindError}, true},
		{"a run_model report", ctx, &envelope.Envelope{ID: "in-1/error/run_model", Kind: envelope.KindError}, false},
		{"another turn's failure reply", ctx, &envelope.Envelope{ID: "in-2/error/turn", Kind: envelope.KindError}, false},
		{"a normal reply with that id", ctx, &envelope.Envelope{ID: "in-1/error/turn", Kind: envelope.KindNormal}, false},
		{"outside a turn", t.Context(), &envelope.Envelope{ID: "in-1/error/turn", Kind: envelope.KindError}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holdFailureReply(tt.ctx, tt.env); got != tt.held {
				t.Fatalf("held = %v, want %v", got, tt.held)
			}
			if got := tr.takeFailure(); (got == tt.env) != tt.held {
				t.Errorf("takeFailure = %v, want the reply only when held", got)
			}
		})
	}
}

// A handed-back turn waits longer at each delivery, so the five default
// deliveries span 15s: more than a cluster's leader election (4–9s).
func TestHandBackDelayOutlastsAnElection(t *testing.T) {
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	var span time.Duration
	for delivery, w := range want {
		got := handBackDelay(uint64(delivery))
		if got != w {
			t.Errorf("handBackDelay(%d) = %v, want %v", delivery, got, w)
		}
		if delivery >= 1 && delivery < 5 {
			span += got
		}
	}
	if span != 15*time.Second {
		t.Errorf("five deliveries span %v, want 15s", span)
	}
}
