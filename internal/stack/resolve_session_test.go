package stack_test

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
)

// router is a session router (a local resolve_session plugin) that counts
// its calls per envelope.
type router struct {
	mu    sync.Mutex
	calls map[string]int
}

func (*router) Name() string { return "router" }

func (r *router) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[in.Message.ID]++
	return "routed:" + in.Message.ChatID, true, nil
}

func (r *router) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.calls)
}

// TestResolveSessionRunsOncePerTurn: the admission gate resolves a turn's
// session and passes it on, so a session router is asked once per turn,
// not again by the pipeline; the turn runs, replies and records on the
// session it answered, and its run says which delivery it answers.
func TestResolveSessionRunsOncePerTurn(t *testing.T) {
	r := &router{calls: map[string]int{}}
	c := stacktest.Start(t, stacktest.Options{
		Script:  fakellm.Script{Steps: []fakellm.Step{{Text: "one"}, {Text: "two"}}},
		Plugins: []hooks.Plugin{r},
	})
	for _, id := range []string{"route-1", "route-2"} {
		outs := c.Turn(t, &envelope.Envelope{ID: id, Content: "hello", Channel: "test", ChatID: "c1"})
		if len(outs) != 1 || outs[0].SessionID != "routed:c1" {
			t.Fatalf("replies to %s: %+v, want one on session routed:c1", id, outs)
		}
	}
	if got, want := r.counts(), map[string]int{"route-1": 1, "route-2": 1}; !maps.Equal(got, want) {
		t.Errorf("resolve_session calls per envelope %v, want %v", got, want)
	}
	if n := len(c.Tape(t, "routed:c1")); n == 0 {
		t.Error("nothing recorded on session routed:c1")
	}
	started := lastEvent[events.RunStartedData](t, c, "routed:c1", events.TypeRunStarted)
	if a := started.Metadata.Answers; a.EnvelopeID != "route-2" || a.InboundSeq == 0 || a.Delivery != 1 {
		t.Errorf("run.started answers %+v, want envelope route-2, its inbound sequence, delivery 1", a)
	}
}

// TestRuntimeWithoutTheGateResolvesOnce: a turn runtime used without the
// admission gate resolves the session itself, once, and answers on it.
func TestRuntimeWithoutTheGateResolvesOnce(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{})
	r := &router{calls: map[string]int{}}
	rt, err := workercmd.NewRuntime(t.Context(), c.Conn, workercmd.Options{
		Topology: natsx.Topology{MemoryStorage: true}, Instance: "direct", Workspace: t.TempDir(), Plugins: []hooks.Plugin{r},
		Models: llm.Config{Model: "openai:unused", APIBase: "http://127.0.0.1:1", APIKey: "x"}, // a command calls no model
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.WithoutCancel(t.Context())) })
	await := c.Gateway.Expect("direct-1")
	env := &envelope.Envelope{ID: "direct-1", Content: ",help", Channel: "test", ChatID: "c2"}
	if err := rt.Process(t.Context(), worker.Inbound{Envelope: env, Delivery: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), stacktest.Wait)
	defer cancel()
	outs, err := await(ctx)
	if err != nil || len(outs) != 1 || outs[0].SessionID != "routed:c2" {
		t.Fatalf("replies %+v, %v; want one on session routed:c2", outs, err)
	}
	if got, want := r.counts(), map[string]int{"direct-1": 1}; !maps.Equal(got, want) {
		t.Errorf("resolve_session calls per envelope %v, want %v", got, want)
	}
}
