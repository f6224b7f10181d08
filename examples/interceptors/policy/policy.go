package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// policy denies tools, asks a person about tools and rewrites models. It implements both hooks and
// serves only the configured ones (hooks.HookSelector), so a worker never
// calls it for a rule it does not enforce.
type policy struct {
	deny  map[string]bool // model-facing tool names
	ask   map[string]bool // model-facing tool names that need a person's approval
	rules askRules
	model string
	from  string
	log   *slog.Logger
}

// askRules are how the asked-about tools are asked about.
type askRules struct {
	Timeout time.Duration
	Default tools.Action
}

func newPolicy(deny, ask string, rules askRules, model, from string, log *slog.Logger) (*policy, error) {
	p := &policy{deny: map[string]bool{}, ask: map[string]bool{}, rules: rules, model: strings.TrimSpace(model), from: strings.TrimSpace(from), log: log}
	for _, t := range splitList(deny) {
		p.deny[tools.ModelName(t)] = true
	}
	for _, t := range splitList(ask) {
		p.ask[tools.ModelName(t)] = true
	}
	if len(p.deny) == 0 && len(p.ask) == 0 && p.model == "" {
		return nil, errors.New("nothing to enforce: set --deny-tools (POLICY_DENY_TOOLS), --ask-tools (POLICY_ASK_TOOLS) or --model (POLICY_MODEL)")
	}
	if len(p.ask) > 0 {
		if err := tools.Ask("", rules.Timeout, rules.Default).ValidAsk(); err != nil {
			return nil, fmt.Errorf("--ask-timeout (POLICY_ASK_TIMEOUT) and --ask-default (POLICY_ASK_DEFAULT): %w", err)
		}
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
		return len(p.deny) > 0 || len(p.ask) > 0
	case hooks.HookBeforeLLMCall:
		return p.model != ""
	}
	return false
}

// BeforeToolCall denies the listed tools, and asks a person about the
// asked-about ones.
func (p *policy) BeforeToolCall(ctx context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if p.ask[in.Call.Tool] && !p.deny[in.Call.Tool] {
		p.log.InfoContext(ctx, "policy.tool_asked", "tool", in.Call.Tool, "run_id", in.Call.RunID)
		return tools.Ask(fmt.Sprintf("Tool '%s' needs your approval.", in.Call.Tool), p.rules.Timeout, p.rules.Default), nil
	}
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
