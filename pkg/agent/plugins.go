package agent

import (
	"context"
	"errors"
	"sync"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// Interceptors is the part of the hook registry the agent loop reaches
// through events: the four agent-loop hooks and continue_prompt.
// *hooks.Registry implements it.
type Interceptors interface {
	BeforeLLMCall(ctx context.Context, in hooks.BeforeLLMCallInput) (llm.Request, *llm.Decision, error)
	AfterLLMCall(ctx context.Context, in hooks.AfterLLMCallInput) error
	BeforeToolCall(ctx context.Context, in hooks.BeforeToolCallInput) (tools.Call, *tools.Decision, error)
	AfterToolCall(ctx context.Context, in hooks.AfterToolCallInput) error
	ContinuePrompt(ctx context.Context, in hooks.ContinuePromptInput) (string, error)
}

// Steering drains the messages sent to a running turn (the steering
// inbox).
type Steering interface {
	Drain(ctx context.Context) ([]llm.Content, error)
}

// Plugins is Bub's AgentPlugins adapter: it wires the application
// hooks onto the run's events, in hook priority order and with the hook
// rules (the registry isolates a failing interception hook):
//
//   - before_llm_call → LLMCallStarted (a returned request replaces
//     Request — a nil ToolNames keeps the offered tools, an empty one
//     withdraws them; finish sets Decision); the agent then calls the
//     provider with exactly that request and records it;
//   - after_llm_call → LLMCallFinished;
//   - before_tool_call → ToolCallStarted (proceed with arguments replaces
//     Call; deny and replace set Decision); the hooks see the arguments of
//     a proceed decision an earlier handler set;
//   - after_tool_call → ToolCallFinished (may assign Result.Result);
//   - continue_prompt → StepFinished with status continue (sets
//     NextPrompt), given the step's prompt and the usage of the step's
//     provider call (nil when it made none);
//   - the steering inbox → MessagesPending (drains and appends).
//
// It returns a function that removes every handler. steer may be nil.
func Plugins(bus *events.Bus, hk Interceptors, steer Steering) (off func()) {
	var mu sync.Mutex
	var prompt llm.Content
	var usage *llm.Usage
	offs := []func(){
		events.On(bus, func(_ context.Context, e *events.StepStarted) error {
			mu.Lock()
			prompt, usage = e.Prompt, nil
			mu.Unlock()
			return nil
		}),
		events.On(bus, func(ctx context.Context, e *events.LLMCallStarted) error {
			req, dec, err := hk.BeforeLLMCall(ctx, hooks.BeforeLLMCallInput{Request: e.Request, State: e.State})
			e.Request, e.Decision = req, dec
			return err
		}),
		events.On(bus, func(ctx context.Context, e *events.LLMCallFinished) error {
			mu.Lock()
			usage = e.Result.Usage
			mu.Unlock()
			return hk.AfterLLMCall(ctx, hooks.AfterLLMCallInput{Request: e.Request, Result: e.Result, State: e.State})
		}),
		events.On(bus, func(ctx context.Context, e *events.ToolCallStarted) error {
			// A decision set by an earlier handler can only be a proceed
			// (deny and replace stop the event): apply its arguments, as the
			// hook chain does, so they are not lost.
			in := e.Call
			if d := e.Decision; d != nil && d.Arguments != nil {
				in = in.WithArguments(d.Arguments)
			}
			call, dec, err := hk.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: in, State: e.State})
			e.Call, e.Decision = call, dec
			return err
		}),
		events.On(bus, func(ctx context.Context, e *events.ToolCallFinished) error {
			return hk.AfterToolCall(ctx, hooks.AfterToolCallInput{Call: e.Call, Result: e.Result, State: e.State})
		}),
		events.On(bus, func(ctx context.Context, e *events.StepFinished) error {
			if e.Status != events.StepContinue {
				return nil
			}
			mu.Lock()
			in := hooks.ContinuePromptInput{RunID: e.RunID, SessionID: e.SessionID, Step: e.Step, Prompt: prompt, State: e.State, Usage: usage}
			mu.Unlock()
			next, err := hk.ContinuePrompt(ctx, in)
			switch {
			case errors.Is(err, hooks.ErrNoAnswer):
				return nil
			case err != nil:
				return err
			}
			e.NextPrompt = next
			return nil
		}),
	}
	if steer != nil {
		offs = append(offs, events.On(bus, func(ctx context.Context, e *events.MessagesPending) error {
			msgs, err := steer.Drain(ctx)
			for _, m := range msgs {
				e.AppendUser(m)
			}
			return err
		}))
	}
	return func() {
		for _, off := range offs {
			off()
		}
	}
}
