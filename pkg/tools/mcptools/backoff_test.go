package mcptools

import (
	"testing"
	"time"
)

// The delay after the nth failure in a row doubles from MinBackoff, stops
// at MaxBackoff, and is jittered to between half and all of it.
func TestBackoff(t *testing.T) {
	s := &server{opts: Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	for n, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := s.backoff(n)
			if d < ceiling/2 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, ceiling/2, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("backoff(%d) took only %d values in 200 draws: no jitter?", n, len(seen))
		}
	}
}
