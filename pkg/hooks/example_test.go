package hooks_test

import (
	"context"
	"fmt"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// builtinPlugin stands in for Bub's builtin plugin.
type builtinPlugin struct{}

func (builtinPlugin) Name() string { return "builtin" }

func (builtinPlugin) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	return in.Message.DefaultSessionID(), true, nil
}

// threads resolves sessions per thread when the message has one.
type threads struct{}

func (threads) Name() string { return "threads" }

func (threads) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	thread := in.Message.Context.String("thread_id")
	return "thread:" + thread, thread != "", nil
}

// readOnly denies writing tools.
type readOnly struct{}

func (readOnly) Name() string { return "read-only" }

func (readOnly) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if in.Call.Tool == "fs_write" {
		return tools.Deny("this session is read-only"), nil
	}
	return nil, nil
}

var (
	_ hooks.SessionResolver     = builtinPlugin{}
	_ hooks.SessionResolver     = threads{}
	_ hooks.ToolCallInterceptor = readOnly{}
)

func Example() {
	ctx := context.Background()
	reg := hooks.New[*memStore, tapeCtx]()
	reg.MustRegister(builtinPlugin{}) // lowest priority
	reg.MustRegister(threads{})
	reg.MustRegister(readOnly{})
	if err := reg.Start(ctx); err != nil {
		panic(err)
	}
	defer reg.Close(ctx)

	msg := &envelope.Envelope{ID: "1", Content: "hi", Channel: "telegram", ChatID: "42"}
	id, _ := reg.ResolveSession(ctx, hooks.ResolveSessionInput{Message: msg})
	fmt.Println(id)

	msg.Context = envelope.NewContext("thread_id", "t7")
	id, _ = reg.ResolveSession(ctx, hooks.ResolveSessionInput{Message: msg})
	fmt.Println(id)

	_, decision, _ := reg.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: tools.Call{Tool: "fs_write"}})
	fmt.Println(decision.Action, decision.Message)
	// Output:
	// telegram:42
	// thread:t7
	// deny this session is read-only
}

func ExampleRegistry_Report() {
	reg := hooks.New[*memStore, tapeCtx]()
	reg.MustRegister(builtinPlugin{})
	reg.MustRegister(threads{})
	reg.MustRegister(readOnly{})
	fmt.Print(reg.Report())
	// Output:
	// before_tool_call [chained, in run order; a decision stops the chain; failures isolated]: read-only
	// resolve_session [firstresult, in run order; the first that answers wins]: threads, builtin
}
