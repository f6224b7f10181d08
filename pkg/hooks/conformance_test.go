package hooks_test

import (
	"context"
	"slices"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/hookstest"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// The registry itself passes the conformance suite with plugins as given.
func TestConformanceInProcess(t *testing.T) {
	hookstest.Run(t, func(_ *testing.T, p hooks.Plugin) hooks.Plugin { return p })
}

// The suite also passes through forwarder, a stand-in for a remote plugin:
// it shares no memory with its plugin except what a remote hop carries
// back, and exposes only the hooks its plugin implements.
func TestConformanceForwarded(t *testing.T) {
	hookstest.Run(t, func(_ *testing.T, p hooks.Plugin) hooks.Plugin {
		return &forwarder{inner: p, served: hooks.HooksOf[struct{}, struct{}](p)}
	})
}

// forwarder implements every agent-loop hook and forwards copies of the
// inputs, the way an interceptor client serialises them; it copies back
// only the tool result, which after_tool_call may rewrite.
type forwarder struct {
	inner  hooks.Plugin
	served []hooks.Hook
}

func (f *forwarder) Name() string { return "remote." + f.inner.Name() }

func (f *forwarder) Describe() hooks.Description {
	return hooks.Description{Remote: true, Service: f.inner.Name()}
}

func (f *forwarder) ServesHook(h hooks.Hook) bool { return slices.Contains(f.served, h) }

// snapshot is the public state a remote plugin receives.
func snapshot(s *bub.State) *bub.State {
	if s == nil {
		return nil
	}
	return bub.NewState(s.Public())
}

func (f *forwarder) BeforeLLMCall(ctx context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	in.Request, in.State = in.Request.Clone(), snapshot(in.State)
	return f.inner.(hooks.LLMCallInterceptor).BeforeLLMCall(ctx, in)
}

func (f *forwarder) AfterLLMCall(ctx context.Context, in hooks.AfterLLMCallInput) error {
	in.Request, in.State = in.Request.Clone(), snapshot(in.State)
	return f.inner.(hooks.LLMCallObserver).AfterLLMCall(ctx, in)
}

func (f *forwarder) BeforeToolCall(ctx context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	in.Call, in.State = in.Call.WithArguments(in.Call.Arguments), snapshot(in.State)
	return f.inner.(hooks.ToolCallInterceptor).BeforeToolCall(ctx, in)
}

func (f *forwarder) AfterToolCall(ctx context.Context, in hooks.AfterToolCallInput) error {
	shared := in.Result
	local := *shared
	in.Call, in.State, in.Result = in.Call.WithArguments(in.Call.Arguments), snapshot(in.State), &local
	err := f.inner.(hooks.ToolCallObserver).AfterToolCall(ctx, in)
	shared.Result = local.Result
	return err
}
