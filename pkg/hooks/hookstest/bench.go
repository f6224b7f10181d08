package hookstest

import (
	"context"
	"strconv"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// The dispatch benchmarks: package hooks's `go test -bench` and figure P1
// of `bub bench` (through testing.Benchmark) run these same functions.
// Goal for the firstresult (resolve_session) and broadcast
// (dispatch_outbound) dispatch: at most 60 ns and 0 allocs per call.

// benchPlugin implements a few hooks with constant answers, as cheaply as
// a real in-process plugin can.
type benchPlugin struct {
	name   string
	answer bool
	state  map[string]any
}

var (
	_ hooks.SessionResolver     = (*benchPlugin)(nil)
	_ hooks.OutboundDispatcher  = (*benchPlugin)(nil)
	_ hooks.StateLoader         = (*benchPlugin)(nil)
	_ hooks.ToolCallInterceptor = (*benchPlugin)(nil)
)

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

// BenchRegistry returns the registry of the dispatch benchmarks: three
// plugins answering resolve_session, dispatch_outbound, load_state and
// before_tool_call with constants, of which only the lowest-priority one
// has an answer, so every dispatch calls all three.
func BenchRegistry() *hooks.Registry[tape.Store, tape.Context] {
	r := hooks.New[tape.Store, tape.Context]()
	for i := range 3 {
		r.MustRegister(&benchPlugin{
			name:   "p" + strconv.Itoa(i),
			answer: i == 0,
			state:  map[string]any{"k" + strconv.Itoa(i): i, "shared": i},
		})
	}
	return r
}

// BenchmarkResolveSession measures a firstresult dispatch
// (resolve_session) over [BenchRegistry].
func BenchmarkResolveSession(b *testing.B) {
	r := BenchRegistry()
	ctx := context.Background()
	in := hooks.ResolveSessionInput{Message: &envelope.Envelope{ID: "1", Channel: "cli", ChatID: "c"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ResolveSession(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDispatchOutbound measures a broadcast dispatch
// (dispatch_outbound) over [BenchRegistry].
func BenchmarkDispatchOutbound(b *testing.B) {
	r := BenchRegistry()
	ctx := context.Background()
	in := hooks.DispatchOutboundInput{Message: &envelope.Envelope{ID: "1", Content: "hi"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.DispatchOutbound(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadState adds the merge of three results into a bub.State;
// the three State.Merge calls (a lock and a map iteration each) dominate.
func BenchmarkLoadState(b *testing.B) {
	r := BenchRegistry()
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

// BenchmarkBeforeToolCall is a chained hook where no plugin has an
// opinion: every implementation is guarded on its own.
func BenchmarkBeforeToolCall(b *testing.B) {
	r := BenchRegistry()
	ctx := context.Background()
	in := hooks.BeforeToolCallInput{Call: tools.Call{RunID: "r", Tool: "fs_read"}, State: bub.NewState(nil)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.BeforeToolCall(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
