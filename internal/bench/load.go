package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// turnFunc runs turn i and returns when its reply arrived.
type turnFunc func(ctx context.Context, i int) error

// closedLoop keeps inflight turns running for d: each of inflight clients
// sends its next turn when the previous one is answered. It returns the
// turns answered and failed, the time from start until the last answer
// and the first failure. Turns still running at d are waited for (and
// counted).
func closedLoop(ctx context.Context, inflight int, d time.Duration, turn turnFunc) (done, failed int, elapsed time.Duration, first error) {
	var next, ok, bad atomic.Int64
	var firstOnce sync.Once
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1))
				if err := turn(ctx, i); err != nil {
					bad.Add(1)
					firstOnce.Do(func() { first = err })
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load()), int(bad.Load()), time.Since(start), first
}

// openLoop starts turns at a fixed rate for d, whatever the answers do,
// and returns the latency of every answered turn (measured from the moment
// it is sent) and the number of failed ones.
func openLoop(ctx context.Context, rate int, d time.Duration, turn turnFunc) (Latencies, int) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	okFlags := make([]bool, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			t0 := time.Now()
			if err := turn(ctx, i); err == nil {
				lat[i], okFlags[i] = time.Since(t0), true
			}
		})
	}
	wg.Wait()
	out := make(Latencies, 0, n)
	failed := 0
	for i := range n {
		if okFlags[i] {
			out = append(out, lat[i])
		} else {
			failed++
		}
	}
	return out, failed
}
