package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/pipeline"
	"github.com/bubbus/bub/pkg/tape"
)

// echoAgent stands in for the agent: it answers the last line of the
// prompt (the builtin puts the message content there).
type echoAgent struct{}

func (echoAgent) RunAgent(_ context.Context, in hooks.RunModelInput) (hooks.Stream, error) {
	lines := strings.Split(in.Prompt.PlainText(), "\n")
	return hooks.TextStream("you said: " + lines[len(lines)-1]), nil
}

// printOutbox stands in for the channel side: it prints every reply.
type printOutbox struct{}

func (printOutbox) Send(_ context.Context, env *envelope.Envelope) error {
	fmt.Printf("-> %s %s [%s] %s\n", env.OutputChannel, env.SessionID, env.ID, env.Content)
	return nil
}

func ExamplePipeline_ProcessInbound() {
	ctx := context.Background()
	reg := hooks.New[tape.Store, tape.Context]()
	bp := builtin.New(builtin.Options{
		Runner: echoAgent{},
		Outbox: printOutbox{},
		Now:    func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	reg.MustRegister(bp) // registered first: the lowest priority
	bp.SetDispatcher(reg)
	if err := reg.Start(ctx); err != nil {
		panic(err)
	}
	defer reg.Close(ctx)

	fw := pipeline.New(reg, "", nil)
	res, err := fw.ProcessInbound(ctx, pipeline.Turn{Inbound: hooks.Inbound{Message: &envelope.Envelope{ID: "m1", Channel: "cli", ChatID: "local", Content: "hello"}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.SessionID)
	fmt.Println(res.Prompt.Text)
	fmt.Println(res.ModelOutput)
	// Output:
	// -> cli cli:local [m1/0] you said: hello
	// cli:local
	// channel=$cli|chat_id=local
	// ---Date: 2025-01-02T03:04:05+00:00---
	// hello
	// you said: hello
}
