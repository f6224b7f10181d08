package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natsx/embedded"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

// P5: reading a session's default context (the entries after its last
// anchor, 50 entries back) from a 100k-entry JetStream tape beside the same
// read of a 100-entry tape, with package tape's own benchmark
// (tapetest.FillBenchTape and ReadMessagesBenchmark) through
// testing.Benchmark.

func runP5(ctx context.Context, e *env) ([]Row, error) {
	dir, err := os.MkdirTemp(e.tmp, "p5-")
	if err != nil {
		return nil, err
	}
	srv, err := embedded.Start(embedded.Config{StoreDir: dir})
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("bench-p5")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	// Without the entry cache: the figure is the read from the stream
	// (a turn on a worker that did not read the session last).
	store, err := tape.NewJetStreamStore(ctx, js, subjects.Default(), tape.WithEntryCache(0))
	if err != nil {
		return nil, err
	}
	sizes := []int{100, e.cfg.tapeEntries}
	tapes := make([]tape.Tape, len(sizes))
	for i, n := range sizes {
		session := fmt.Sprintf("bench-%d", n)
		if err := tapetest.FillBenchTape(ctx, store, session, n, func(done int) {
			e.progress.Show(fmt.Sprintf("P5: writing the %d-entry tape (%d)", n, done))
		}); err != nil {
			return nil, err
		}
		tapes[i] = tape.New(store, session, tape.Context{})
	}
	setBenchTime(e.cfg.benchTime)
	results := make([][]float64, len(sizes))
	for rep := -1; rep < e.cfg.reps; rep++ {
		for i, n := range sizes {
			e.progress.Step(fmt.Sprintf("P5 read, %d entries%s", n, repLabel(rep, e.cfg.reps)))
			r := testing.Benchmark(tapetest.ReadMessagesBenchmark(tapes[i]))
			if r.N == 0 {
				return nil, fmt.Errorf("reading the %d-entry tape: %w", n, errBenchmarkFailed)
			}
			if rep >= 0 {
				results[i] = append(results[i], float64(r.T.Nanoseconds())/float64(r.N))
			}
		}
	}
	ratio := Summarize(ratios(results[1], results[0]))
	return []Row{{
		ID: "P5", Figure: fmt.Sprintf("context read (49 messages after the anchor 50 back), %d-entry tape", sizes[1]),
		Value: Summarize(results[1]), Unit: Nanos,
		LimitName: "the same read of a 100-entry tape", Limit: Summarize(results[0]),
		Ratio: ratio, Goal: "≤ 2×", Result: AtMost(ratio.Median, 2),
	}}, nil
}
