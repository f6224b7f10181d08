package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// P2: one remote interceptor hop to a separate process beside a raw
// nats.go request/reply of the same request body to a responder in that
// process answering the same reply bytes.

const hopWarmup = 300

func runP2(ctx context.Context, e *env) ([]Row, error) {
	dir, err := os.MkdirTemp(e.tmp, "p2-")
	if err != nil {
		return nil, err
	}
	e.progress.Show("P2: starting the NATS server and interceptor processes")
	srv, url, err := startServer(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	host, _, err := startProc(ctx, "interceptor", e.opts.Self, []string{"bench", "--serve", RoleInterceptor, "--nats", url}, nil, readyRe)
	if err != nil {
		return nil, err
	}
	defer host.stop()
	nc, err := nats.Connect(url, nats.Name("bench-p2"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	names := subjects.Default()
	p, err := remote.New(nc, names, remote.Config{Service: hookService, Hooks: []hooks.Hook{hooks.HookBeforeToolCall}}, nil)
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	in := hooks.BeforeToolCallInput{
		Call: tools.Call{RunID: "01JABCDEF0123456789ABCDEFG", Tool: "bash", CallID: "call_1",
			Arguments: map[string]any{"cmd": "go test ./...", "timeout_seconds": 30.0}},
		State: bub.NewState(map[string]any{bub.StateSessionID: "http:42", bub.StateModel: "openai:gpt-4o", "mode": "default"}),
	}
	// The body remote.Plugin sends for in.
	payload, err := json.Marshal(remote.Request[any]{
		Hook: hooks.HookBeforeToolCall, RunID: in.Call.RunID, SessionID: "http:42",
		State: in.State.Public(), Input: remote.BeforeToolCallInput{Call: in.Call},
	})
	if err != nil {
		return nil, err
	}
	raw := simNames().Hook(rawService, string(hooks.HookBeforeToolCall))
	rawOp := func() error {
		_, err := nc.Request(raw, payload, 2*time.Second)
		return err
	}
	hopOp := func() error {
		d, err := p.BeforeToolCall(ctx, in)
		if err == nil && d != nil {
			err = fmt.Errorf("unexpected decision %+v", d)
		}
		return err
	}
	sample := func(op func() error, n int) (Latencies, error) {
		lat := make(Latencies, 0, n)
		for range n {
			t0 := time.Now()
			if err := op(); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t0))
		}
		return lat, nil
	}
	e.progress.Step("P2: warm-up")
	if _, err := sample(rawOp, hopWarmup); err != nil {
		return nil, fmt.Errorf("raw request: %w", err)
	}
	if _, err := sample(hopOp, hopWarmup); err != nil {
		return nil, fmt.Errorf("interceptor hop: %w", err)
	}
	var f50, f99, l50, l99 []float64
	for rep := range e.cfg.reps {
		e.progress.Step("P2 raw request/reply" + repLabel(rep, e.cfg.reps))
		l, err := sample(rawOp, e.cfg.hopSamples)
		if err != nil {
			return nil, err
		}
		e.progress.Step("P2 interceptor hop" + repLabel(rep, e.cfg.reps))
		f, err := sample(hopOp, e.cfg.hopSamples)
		if err != nil {
			return nil, err
		}
		l50, l99 = append(l50, float64(l.P50())), append(l99, float64(l.P99()))
		f50, f99 = append(f50, float64(f.P50())), append(f99, float64(f.P99()))
	}
	mk := func(pct string, fig, lim []float64, bound float64) Row {
		ratio := Summarize(ratios(fig, lim))
		return Row{
			ID: "P2", Figure: fmt.Sprintf("one remote interceptor hop (before_tool_call, separate process), %s", pct),
			Value: Summarize(fig), Unit: Nanos,
			LimitName: fmt.Sprintf("raw nats.go request/reply between the same processes, same %d B body, %s", len(payload), pct),
			Limit:     Summarize(lim), Ratio: ratio, Goal: fmt.Sprintf("≤ %g×", bound), Result: AtMost(ratio.Median, bound),
		}
	}
	return []Row{mk("p50", f50, l50, 1.25), mk("p99", f99, l99, 1.5)}, nil
}
