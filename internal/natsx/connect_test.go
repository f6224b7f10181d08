package natsx_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natsx"
)

// TestReconnectForeverWithBackoffAndJitter: the connection options
// reconnect forever through ReconnectDelay, which doubles from 250ms to
// 5s per round and adds up to 25% of random jitter; a lame-duck handler
// is set.
func TestReconnectForeverWithBackoffAndJitter(t *testing.T) {
	opts, err := natsx.ClientConfig{URL: "nats://127.0.0.1:4222"}.Options(nil)
	if err != nil {
		t.Fatal(err)
	}
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.MaxReconnect != -1 || !o.RetryOnFailedConnect {
		t.Errorf("max reconnects %d, retry on failed connect %v; want -1 (forever), true", o.MaxReconnect, o.RetryOnFailedConnect)
	}
	if o.CustomReconnectDelayCB == nil || o.LameDuckModeHandler == nil {
		t.Fatal("no reconnect delay or lame-duck handler set")
	}
	for _, tt := range []struct {
		attempts int
		base     time.Duration
	}{{1, 250 * time.Millisecond}, {2, 500 * time.Millisecond}, {3, time.Second}, {5, 4 * time.Second}, {6, 5 * time.Second}, {1000, 5 * time.Second}} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := o.CustomReconnectDelayCB(tt.attempts)
			if d < tt.base || d > tt.base+tt.base/4 {
				t.Fatalf("delay after %d rounds %v, want %v plus up to 25%%", tt.attempts, d, tt.base)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("delay after %d rounds is always %v: no jitter", tt.attempts, o.CustomReconnectDelayCB(tt.attempts))
		}
	}
}
