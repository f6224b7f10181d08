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
)

// BenchmarkRunEcho is one run of the echo model on a fresh memory tape
// with the AgentPlugins adapter on the bus: "bare" measures the agent loop
// alone, "recorded" adds the recorder mapping every event to tape entries
// (CloudEvent encoding included), as a worker does.
func BenchmarkRunEcho(b *testing.B) {
	router, err := providers.NewRouter(llm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	a := agent.New(router, &tools.Registry{}, agent.Settings{Model: "echo:echo"}, nil, nil)
	reg := hooks.New[tape.Store, tape.Context]()
	ctx := context.Background()
	for _, recorded := range []bool{false, true} {
		name := map[bool]string{false: "bare", true: "recorded"}[recorded]
		b.Run(name, func(b *testing.B) {
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
