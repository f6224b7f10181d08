package hookstest

import (
	"context"
	"sync"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// journal records which suite plugin ran, in order, and what it saw.
// Plugins may run in another goroutine or behind a network hop, so
// everything they observe goes through the journal's lock.
type journal struct {
	mu    sync.Mutex
	calls []string
	seen  map[string]any
}

func (j *journal) add(name string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, name)
}

func (j *journal) see(key string, v any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seen == nil {
		j.seen = map[string]any{}
	}
	j.seen[key] = v
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.calls...)
}

func (j *journal) saw(key string) any {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seen[key]
}

// The suite's plugins implement one hook each (policy implements two), so
// a wrapper that exposes hooks its plugin lacks is caught.

type beforeLLM struct {
	name string
	j    *journal
	fn   func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error)
}

func (p *beforeLLM) Name() string { return p.name }

func (p *beforeLLM) BeforeLLMCall(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	p.j.add(p.name)
	return p.fn(in)
}

type afterLLM struct {
	name string
	j    *journal
	fn   func(hooks.AfterLLMCallInput) error
}

func (p *afterLLM) Name() string { return p.name }

func (p *afterLLM) AfterLLMCall(_ context.Context, in hooks.AfterLLMCallInput) error {
	p.j.add(p.name)
	return p.fn(in)
}

type beforeTool struct {
	name string
	j    *journal
	fn   func(hooks.BeforeToolCallInput) (*tools.Decision, error)
}

func (p *beforeTool) Name() string { return p.name }

func (p *beforeTool) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	p.j.add(p.name)
	return p.fn(in)
}

type afterTool struct {
	name string
	j    *journal
	fn   func(hooks.AfterToolCallInput) error
}

func (p *afterTool) Name() string { return p.name }

func (p *afterTool) AfterToolCall(_ context.Context, in hooks.AfterToolCallInput) error {
	p.j.add(p.name)
	return p.fn(in)
}

// policy implements before_tool_call (through beforeTool) and
// after_tool_call.
type policy struct {
	beforeTool
	after func(hooks.AfterToolCallInput) error
}

func (p *policy) AfterToolCall(_ context.Context, in hooks.AfterToolCallInput) error {
	p.j.add(p.name + ".after")
	return p.after(in)
}

var (
	_ hooks.LLMCallInterceptor  = (*beforeLLM)(nil)
	_ hooks.LLMCallObserver     = (*afterLLM)(nil)
	_ hooks.ToolCallInterceptor = (*beforeTool)(nil)
	_ hooks.ToolCallObserver    = (*afterTool)(nil)
	_ hooks.ToolCallInterceptor = (*policy)(nil)
	_ hooks.ToolCallObserver    = (*policy)(nil)
)
