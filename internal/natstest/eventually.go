package natstest

import (
	"testing"
	"time"
)

// Eventually polls cond every 10ms until it holds, failing the test when
// within passes first. cond returns whether it holds and, when not, what
// is still missing (shown on failure). Tests wait on conditions this way,
// never on fixed sleeps.
func Eventually(t testing.TB, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, missing := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("not within %v: %s", within, missing)
		case <-tick.C:
		}
	}
}
