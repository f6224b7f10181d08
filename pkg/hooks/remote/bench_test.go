package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// Percentiles need enough samples whatever -benchtime says (make bench
// runs 3x): below minSamples, more operations are measured with the
// benchmark timer stopped.
const (
	warmup     = 200
	minSamples = 2000
)

// timed runs op and appends its latency to lat.
func timed(b *testing.B, lat []time.Duration, op func() error) []time.Duration {
	start := time.Now()
	if err := op(); err != nil {
		b.Fatal(err)
	}
	return append(lat, time.Since(start))
}

// percentiles sorts lat and returns its p50 and p99.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// measure runs op b.N times (and up to minSamples) after a warm-up and
// reports the p50 and p99 latency.
func measure(b *testing.B, op func() error) {
	for range warmup {
		timed(b, nil, op)
	}
	lat := make([]time.Duration, 0, max(b.N, minSamples))
	b.ResetTimer()
	for range b.N {
		lat = timed(b, lat, op)
	}
	b.StopTimer()
	for len(lat) < minSamples {
		lat = timed(b, lat, op)
	}
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
}

// ratios measures minSamples pairs of op and base, alternating so both
// see the same machine load, and reports op's p50 and p99 as ratios of
// base's.
func ratios(b *testing.B, op, base func() error) {
	opLat := make([]time.Duration, 0, minSamples)
	baseLat := make([]time.Duration, 0, minSamples)
	for range minSamples {
		baseLat = timed(b, baseLat, base)
		opLat = timed(b, opLat, op)
	}
	p50, p99 := percentiles(opLat)
	b50, b99 := percentiles(baseLat)
	b.ReportMetric(float64(p50)/float64(b50), "p50-ratio")
	b.ReportMetric(float64(p99)/float64(b99), "p99-ratio")
}

// BenchmarkInterceptorHop measures one before_tool_call hop — client
// plugin, NATS, interceptor.Serve, plugin, and back — beside a raw
// nats.go request/reply carrying the same request and reply bytes, in the
// same run, over separate TCP connections for client and server. The
// interceptor sub-benchmark also reports its p50 and p99 as ratios of the
// raw ones, from samples of both taken alternately. Goal: p50 ≤ 1.25×,
// p99 ≤ 1.5×.
func BenchmarkInterceptorHop(b *testing.B) {
	s := natstest.Start(b)
	serverNC, clientNC := s.Conn(b), s.Conn(b)
	names := subjects.Default()
	ctx := context.Background()

	svc, err := interceptor.Serve(ctx, serverNC, names, allow{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Stop(ctx) })
	p, err := remote.New(clientNC, names, remote.Config{Service: "allow"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	in := hooks.BeforeToolCallInput{
		Call: tools.Call{RunID: "01JABCDEF0123456789ABCDEFG", Tool: "bash", CallID: "call_1",
			Arguments: map[string]any{"cmd": "go test ./...", "timeout_seconds": 30.0}},
		State: bub.NewState(map[string]any{bub.StateSessionID: "http:42", bub.StateModel: "openai:gpt-4o", "mode": "default"}),
	}

	payload, err := json.Marshal(remote.Request[remote.BeforeToolCallInput]{
		Hook: hooks.HookBeforeToolCall, RunID: in.Call.RunID, SessionID: "http:42",
		State: in.State.Public(), Input: remote.BeforeToolCallInput{Call: in.Call},
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := names.Hook("raw", string(hooks.HookBeforeToolCall))
	sub, err := serverNC.Subscribe(raw, func(m *nats.Msg) { _ = m.Respond([]byte("{}")) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := serverNC.Flush(); err != nil {
		b.Fatal(err)
	}

	rawOp := func() error {
		_, err := clientNC.Request(raw, payload, time.Second)
		return err
	}
	hopOp := func() error {
		dec, err := p.BeforeToolCall(ctx, in)
		if dec != nil {
			return fmt.Errorf("decision %+v", dec)
		}
		return err
	}
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		measure(b, rawOp)
	})
	b.Run("interceptor", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		measure(b, hopOp)
		ratios(b, hopOp, rawOp)
	})
}
