package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// policy denies tools and rewrites models. It implements both hooks and
// serves only the configured ones (hooks.HookSelector), so a worker never
// calls it for a rule it does not enforce.
type policy struct {
	deny  map[string]bool // model-facing tool names
	model string
	from  string
	log   *slog.Logger
}

func newPolicy(deny, model, from string, log *slog.Logger) (*policy, error) {
	p := &policy{deny: map[string]bool{}, model: strings.TrimSpace(model), from: strings.TrimSpace(from), log: log}
	for _, t := range splitList(deny) {
		p.deny[tools.ModelName(t)] = true
	}
	if len(p.deny) == 0 && p.model == "" {
		return nil, errors.New("nothing to enforce: set --deny-tools (POLICY_DENY_TOOLS) or --model (POLICY_MODEL)")
	}
	if p.from != "" && p.model == "" {
		return nil, errors.New("--model-from (POLICY_MODEL_FROM) needs --model (POLICY_MODEL)")
	}
	return p, nil
}

var (
	_ hooks.ToolCallInterceptor = (*policy)(nil)
	_ hooks.LLMCallInterceptor  = (*policy)(nil)
	_ hooks.HookSelector        = (*policy)(nil)
)

func (*policy) Name() string { return "policy" }

// ServesHook serves before_tool_call when tools are denied and
// before_llm_call when a model is set.
func (p *policy) ServesHook(h hooks.Hook) bool {
	switch h {
	case hooks.HookBeforeToolCall:
		return len(p.deny) > 0
	case hooks.HookBeforeLLMCall:
		return p.model != ""
	}
	return false
}

// BeforeToolCall denies the listed tools.
func (p *policy) BeforeToolCall(ctx context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if !p.deny[in.Call.Tool] {
		p.log.DebugContext(ctx, "policy.tool_allowed", "tool", in.Call.Tool, "run_id", in.Call.RunID)
		return nil, nil
	}
	p.log.InfoContext(ctx, "policy.tool_denied", "tool", in.Call.Tool, "run_id", in.Call.RunID)
	return tools.Deny(fmt.Sprintf("Tool '%s' is not allowed by policy.", in.Call.Tool)), nil
}

// BeforeLLMCall rewrites the model (only calls to the --model-from model
// when set).
func (p *policy) BeforeLLMCall(ctx context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	if in.Request.Model == p.model || p.from != "" && in.Request.Model != p.from {
		p.log.DebugContext(ctx, "policy.model_kept", "model", in.Request.Model, "run_id", in.Request.RunID)
		return nil, nil, nil
	}
	p.log.InfoContext(ctx, "policy.model_rewritten", "from", in.Request.Model, "to", p.model, "run_id", in.Request.RunID)
	r := in.Request.Clone()
	r.Model = p.model
	return &r, nil, nil
}
