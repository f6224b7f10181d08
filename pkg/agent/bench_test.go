package agent_test

import (
	"context"
	"testing"

	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/providers"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// BenchmarkRunEcho is one run of the echo model on a fresh memory tape
// with the AgentPlugins adapter on the bus: "bare" measures the agent loop
// alone, "recorded" adds the recorder mapping every event to tape entries
// (CloudEvent encoding included), as a worker does, and "tools" offers
// the builtin tools of a frozen registry (a worker's) on top of that.
func BenchmarkRunEcho(b *testing.B) {
	router, err := providers.NewRouter(llm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	shells, err := toolkit.NewShells()
	if err != nil {
		b.Fatal(err)
	}
	defer shells.Close()
	builtin := &tools.Registry{}
	if err := toolkit.Register(builtin, toolkit.Options{Shells: shells}); err != nil {
		b.Fatal(err)
	}
	builtin.Freeze()
	reg := hooks.New[tape.Store, tape.Context]()
	ctx := context.Background()
	for _, variant := range []string{"bare", "recorded", "tools"} {
		registry := &tools.Registry{}
		if variant == "tools" {
			registry = builtin
		}
		a := agent.New(router, registry, agent.Settings{Model: "echo:echo"}, nil, nil)
		recorded := variant != "bare"
		b.Run(variant, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tt := newTestTape()
				bus := &events.Bus{}
				agent.Plugins(bus, reg, nil)
				if recorded {
					bus.OnEmitted(tt.record)
				}
				out, err := a.Run(ctx, agent.Run{
					RunID: testRunID, SessionID: testSession, Prompt: llm.Text("hello benchmark world"),
					State: bub.NewState(nil), Tape: tt, Bus: bus,
				})
				if err != nil || out.Text != "hello benchmark world" {
					b.Fatalf("run: %q, %v", out.Text, err)
				}
			}
		})
	}
}
