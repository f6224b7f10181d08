package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// P7: the cost of publishing one lifecycle event as a CloudEvent through
// the events Bridge beside MarshalJSON of a prebuilt CloudEvent and a raw
// async publish of the bytes. The NATS server is a separate process, so
// the harness's CPU time is the publisher's cost alone.

// publishCost is one repetition: CPU and wall time and allocations per
// event.
type publishCost struct {
	cpu, wall, allocs float64
}

func measurePublish(n int, run func(n int) error) (publishCost, error) {
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	c0, t0 := selfCPU(), time.Now()
	if err := run(n); err != nil {
		return publishCost{}, err
	}
	wall, cpu := time.Since(t0), selfCPU()-c0
	runtime.ReadMemStats(&ms1)
	return publishCost{
		cpu:    float64(cpu) / float64(n),
		wall:   float64(wall) / float64(n),
		allocs: float64(ms1.Mallocs-ms0.Mallocs) / float64(n),
	}, nil
}

func runP7(ctx context.Context, e *env) ([]Row, error) {
	dir, err := os.MkdirTemp(e.tmp, "p7-")
	if err != nil {
		return nil, err
	}
	e.progress.Show("P7: starting the NATS server")
	srv, url, err := startServer(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	nc, err := nats.Connect(url, nats.Name("bench-p7"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(events.DefaultMaxInFlight))
	if err != nil {
		return nil, err
	}
	names := subjects.Default()
	if err := natsx.EnsureTopology(ctx, js, names, natsx.Topology{}); err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return nil, err
	}
	meta := events.Meta{State: bub.NewState(nil), RunID: "run-0199a1b2-0000-7000-8000-000000000001", SessionID: "telegram:42"}
	ev := &events.ToolCallFinished{Meta: meta,
		Call:   tools.Call{RunID: meta.RunID, Tool: "fs_read", CallID: "call_1", Arguments: map[string]any{"path": "pkg/events/bus.go"}},
		Result: &tools.Result{RunID: meta.RunID, Tool: "fs_read", Result: "package events\n\nimport (\n\t\"context\"\n)\n", DurationMS: 2},
	}
	source := events.Source("worker", "w1")
	prebuilt, err := events.ToCloudEvent(ev, events.Attrs{Source: source, Seq: 1})
	if err != nil {
		return nil, err
	}
	subject := names.Event(meta.SessionID, events.SubjectName(prebuilt.Type()))

	raw := func(n int) error {
		for range n {
			body, err := prebuilt.MarshalJSON()
			if err != nil {
				return err
			}
			if _, err := js.PublishAsync(subject, body, jetstream.WithStallWait(time.Minute)); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("raw publish: acknowledgements missing after a minute")
		}
	}
	br, err := events.NewBridge(js, names, source)
	if err != nil {
		return nil, err
	}
	defer br.Close(context.WithoutCancel(ctx))
	bridge := func(n int) error {
		var bus events.Bus
		att := br.Attach(&bus)
		defer att.Detach()
		for range n {
			if _, err := events.Emit(ctx, &bus, ev); err != nil {
				return err
			}
		}
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return att.Flush(fctx)
	}
	kinds := []struct {
		name string
		run  func(int) error
	}{{"MarshalJSON + raw publish", raw}, {"bridge", bridge}}
	costs := make([][]publishCost, len(kinds))
	for rep := -1; rep < e.cfg.reps; rep++ {
		for i, k := range kinds {
			e.progress.Step("P7 " + k.name + repLabel(rep, e.cfg.reps))
			n := e.cfg.events
			if rep < 0 {
				n /= 4
			}
			c, err := measurePublish(n, k.run)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.name, err)
			}
			if err := stream.Purge(ctx); err != nil {
				return nil, err
			}
			if rep >= 0 {
				costs[i] = append(costs[i], c)
			}
		}
	}
	field := func(cs []publishCost, f func(publishCost) float64) []float64 {
		out := make([]float64, len(cs))
		for i, c := range cs {
			out[i] = f(c)
		}
		return out
	}
	cpuOf := func(c publishCost) float64 { return c.cpu }
	wallOf := func(c publishCost) float64 { return c.wall }
	allocsOf := func(c publishCost) float64 { return c.allocs }
	lim, fig := field(costs[0], cpuOf), field(costs[1], cpuOf)
	ratio := Summarize(ratios(fig, lim))
	return []Row{{
		ID: "P7", Figure: "CloudEvent encode+publish per lifecycle event through events.Bridge (publisher CPU time)",
		Value: Summarize(fig), Unit: Nanos,
		Extra: fmt.Sprintf("%.0f allocs; wall %.1f µs vs %.1f µs", Summarize(field(costs[1], allocsOf)).Median,
			Summarize(field(costs[1], wallOf)).Median/1e3, Summarize(field(costs[0], wallOf)).Median/1e3),
		LimitName: fmt.Sprintf("e.MarshalJSON() + js.PublishAsync of a prebuilt event (%.0f allocs)", Summarize(field(costs[0], allocsOf)).Median),
		Limit:     Summarize(lim), Ratio: ratio, Goal: "≤ 1.5×", Result: AtMost(ratio.Median, 1.5),
	}}, nil
}
