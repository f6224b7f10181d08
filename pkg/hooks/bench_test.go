package hooks_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// benchPlugin implements a few hooks with constant answers, as cheaply as a
// real in-process plugin can.
type benchPlugin struct {
	name   string
	answer bool
	state  map[string]any
}

func (p *benchPlugin) Name() string { return p.name }

func (p *benchPlugin) ResolveSession(context.Context, hooks.ResolveSessionInput) (string, bool, error) {
	if p.answer {
		return "session", true, nil
	}
	return "", false, nil
}

func (p *benchPlugin) DispatchOutbound(context.Context, hooks.DispatchOutboundInput) (bool, error) {
	return p.answer, nil
}

func (p *benchPlugin) LoadState(context.Context, hooks.LoadStateInput) (map[string]any, error) {
	return p.state, nil
}

func (p *benchPlugin) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

// benchRegistry registers three plugins; only the lowest-priority one
// answers, so every dispatch calls all three.
func benchRegistry(b *testing.B) *hooks.Registry[*memStore, tapeCtx] {
	r := hooks.New[*memStore, tapeCtx]()
	for i := range 3 {
		r.MustRegister(&benchPlugin{
			name:   "p" + strconv.Itoa(i),
			answer: i == 0,
			state:  map[string]any{"k" + strconv.Itoa(i): i, "shared": i},
		})
	}
	return r
}

// The dispatch benchmarks run three in-process plugins. Goal for the
// firstresult (ResolveSession) and broadcast (DispatchOutbound) dispatch:
// at most 60 ns/op and 0 allocs/op.

func BenchmarkResolveSession3(b *testing.B) {
	r := benchRegistry(b)
	ctx := context.Background()
	in := hooks.ResolveSessionInput{Message: &envelope.Envelope{ID: "1", Channel: "cli", ChatID: "c"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ResolveSession(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDispatchOutbound3(b *testing.B) {
	r := benchRegistry(b)
	ctx := context.Background()
	in := hooks.DispatchOutboundInput{Message: &envelope.Envelope{ID: "1", Content: "hi"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.DispatchOutbound(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadState3 adds the merge of three results into a bub.State;
// the three State.Merge calls (a lock and a map iteration each) dominate.
func BenchmarkLoadState3(b *testing.B) {
	r := benchRegistry(b)
	ctx := context.Background()
	in := hooks.LoadStateInput{Message: &envelope.Envelope{ID: "1"}, SessionID: "s"}
	state := bub.NewState(nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.LoadState(ctx, in, state); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBeforeToolCall3 is a chained hook where no plugin has an
// opinion: every implementation is guarded on its own.
func BenchmarkBeforeToolCall3(b *testing.B) {
	r := benchRegistry(b)
	ctx := context.Background()
	in := hooks.BeforeToolCallInput{Call: tools.Call{RunID: "r", Tool: "fs_read"}, State: bub.NewState(nil)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.BeforeToolCall(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
