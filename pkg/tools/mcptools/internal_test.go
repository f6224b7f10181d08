package mcptools

import (
	"slices"
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

// A stdio server gets the base variables of the worker and its own env,
// never the worker's other variables (model keys, NATS credentials).
func TestServerEnv(t *testing.T) {
	worker := map[string]string{"PATH": "/bin", "HOME": "/h", "LANG": "C", "BUB_OPENAI_API_KEY": "sk-1", "BUB_MCP_SERVERS": "{}", "BUB_NATS_PASSWORD": "pw"}
	env := serverEnv(func(k string) string { return worker[k] }, map[string]string{"TOKEN": "t", "LANG": "de_DE"})
	slices.Sort(env)
	if want := []string{"HOME=/h", "LANG=de_DE", "PATH=/bin", "TOKEN=t"}; !slices.Equal(env, want) {
		t.Errorf("server env %v, want %v", env, want)
	}
}
