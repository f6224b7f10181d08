package bench

import (
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/hooks/hookstest"
)

// P1: in-process hook dispatch with three plugins, measured by package
// hooks's own benchmarks (hookstest.BenchmarkResolveSession and
// BenchmarkDispatchOutbound) through testing.Benchmark. There is no limit
// to measure in the same run (the reference is Python Bub's pluggy,
// 1.8–2.6 µs per call on this machine kind); the goal is absolute.

// setBenchTime makes testing.Benchmark run each benchmark for about d. The
// testing flags exist under `go test`; elsewhere testing.Init registers
// them.
func setBenchTime(d time.Duration) {
	if flag.Lookup("test.benchtime") == nil {
		testing.Init()
	}
	_ = flag.Set("test.benchtime", d.String())
}

// Dispatch goals.
const (
	dispatchGoalNS = 60
	pluggyRef      = "Python Bub pluggy, 3 impls: 1.8–2.6 µs (reference, not run)"
)

// runP1 measures both dispatch kinds reps times each, interleaved, after a
// warm-up run of each.
func runP1(e *env) ([]Row, error) {
	setBenchTime(e.cfg.benchTime)
	kinds := []struct {
		name string
		f    func(*testing.B)
	}{
		{"firstresult (resolve_session)", hookstest.BenchmarkResolveSession},
		{"broadcast (dispatch_outbound)", hookstest.BenchmarkDispatchOutbound},
	}
	ns := make([][]float64, len(kinds))
	allocs := make([]int64, len(kinds))
	for rep := -1; rep < e.cfg.reps; rep++ { // rep -1 is the warm-up
		for i, k := range kinds {
			e.progress.Step("P1 " + k.name + repLabel(rep, e.cfg.reps))
			r := testing.Benchmark(k.f)
			if r.N == 0 {
				return nil, errBenchmarkFailed
			}
			if rep < 0 {
				continue
			}
			ns[i] = append(ns[i], float64(r.T.Nanoseconds())/float64(r.N))
			allocs[i] = max(allocs[i], r.AllocsPerOp())
		}
	}
	var rows []Row
	for i, k := range kinds {
		v := Summarize(ns[i])
		rows = append(rows, Row{
			ID: "P1", Figure: "in-process hook dispatch, 3 plugins, " + k.name + " (per call)",
			Value: v, Unit: Nanos, Extra: strconv.FormatInt(allocs[i], 10) + " allocs",
			LimitName: pluggyRef,
			Goal:      "≤ 60 ns/call, 0 allocs",
			Result:    Both(AtMost(v.Median, dispatchGoalNS), AtMost(float64(allocs[i]), 0)),
		})
	}
	return rows, nil
}

func repLabel(rep, reps int) string {
	if rep < 0 {
		return " (warm-up)"
	}
	return " rep " + strconv.Itoa(rep+1) + "/" + strconv.Itoa(reps)
}
