package bench

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// P1: in-process hook dispatch with three plugins. There is no limit to
// measure in the same run (the reference is Python Bub's pluggy, 1.8–2.6 µs
// per call on this machine kind); the goal is absolute.

// dispatchPlugin answers resolve_session (only when answer is set) and
// dispatch_outbound with constants, as cheaply as an in-process plugin can.
type dispatchPlugin struct {
	name   string
	answer bool
}

func (p *dispatchPlugin) Name() string { return p.name }

func (p *dispatchPlugin) ResolveSession(context.Context, hooks.ResolveSessionInput) (string, bool, error) {
	if p.answer {
		return "session", true, nil
	}
	return "", false, nil
}

func (p *dispatchPlugin) DispatchOutbound(context.Context, hooks.DispatchOutboundInput) (bool, error) {
	return p.answer, nil
}

var (
	_ hooks.SessionResolver    = (*dispatchPlugin)(nil)
	_ hooks.OutboundDispatcher = (*dispatchPlugin)(nil)
)

// dispatchRegistry registers three plugins of which only the first
// registered (lowest priority) answers, so every firstresult dispatch calls
// all three.
func dispatchRegistry() *hooks.Registry[tape.Store, tape.Context] {
	r := hooks.New[tape.Store, tape.Context]()
	for i := range 3 {
		r.MustRegister(&dispatchPlugin{name: "p" + strconv.Itoa(i), answer: i == 0})
	}
	return r
}

// setBenchTime makes testing.Benchmark run each benchmark for about d. The
// testing flags exist under `go test`; elsewhere testing.Init registers
// them.
func setBenchTime(d time.Duration) {
	if flag.Lookup("test.benchtime") == nil {
		testing.Init()
	}
	_ = flag.Set("test.benchtime", d.String())
}

func benchResolveSession(b *testing.B) {
	r := dispatchRegistry()
	ctx := context.Background()
	in := hooks.ResolveSessionInput{Message: &envelope.Envelope{ID: "1", Channel: "cli", ChatID: "c"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ResolveSession(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDispatchOutbound(b *testing.B) {
	r := dispatchRegistry()
	ctx := context.Background()
	in := hooks.DispatchOutboundInput{Message: &envelope.Envelope{ID: "1", Content: "hi"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.DispatchOutbound(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
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
		{"firstresult (resolve_session)", benchResolveSession},
		{"broadcast (dispatch_outbound)", benchDispatchOutbound},
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
