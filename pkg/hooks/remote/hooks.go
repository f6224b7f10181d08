package remote

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// This file holds one method per hook the plugin forwards. Each sends the
// hook's input and applies the failure policy; the registry then applies
// the hook's own rules exactly as for a local plugin.

var (
	_ hooks.Plugin                 = (*Plugin)(nil)
	_ hooks.Starter                = (*Plugin)(nil)
	_ hooks.Describer              = (*Plugin)(nil)
	_ hooks.HookSelector           = (*Plugin)(nil)
	_ hooks.SessionResolver        = (*Plugin)(nil)
	_ hooks.StateLoader            = (*Plugin)(nil)
	_ hooks.PromptBuilder          = (*Plugin)(nil)
	_ hooks.StateSaver             = (*Plugin)(nil)
	_ hooks.OutboundRenderer       = (*Plugin)(nil)
	_ hooks.OutboundDispatcher     = (*Plugin)(nil)
	_ hooks.RuntimeOptionsProvider = (*Plugin)(nil)
	_ hooks.ErrorObserver          = (*Plugin)(nil)
	_ hooks.SystemPrompter         = (*Plugin)(nil)
	_ hooks.MessageAdmitter        = (*Plugin)(nil)
	_ hooks.LLMCallInterceptor     = (*Plugin)(nil)
	_ hooks.LLMCallObserver        = (*Plugin)(nil)
	_ hooks.ToolCallInterceptor    = (*Plugin)(nil)
	_ hooks.ToolCallObserver       = (*Plugin)(nil)
	_ hooks.PromptContinuer        = (*Plugin)(nil)
)

// ResolveSession forwards resolve_session.
func (p *Plugin) ResolveSession(ctx context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	c := call{hook: hooks.HookResolveSession}
	if in.Message != nil {
		c.sessionID = in.Message.SessionID
	}
	a, err := roundTrip(ctx, p, c, in, answerOf[string])
	return a.value, a.ok, p.ordinary(ctx, err)
}

// LoadState forwards load_state.
func (p *Plugin) LoadState(ctx context.Context, in hooks.LoadStateInput) (map[string]any, error) {
	a, err := roundTrip(ctx, p, call{hook: hooks.HookLoadState, sessionID: in.SessionID}, in, answerOf[map[string]any])
	return a.value, p.ordinary(ctx, err)
}

// BuildPrompt forwards build_prompt.
func (p *Plugin) BuildPrompt(ctx context.Context, in hooks.BuildPromptInput) (llm.Content, bool, error) {
	c := call{hook: hooks.HookBuildPrompt, sessionID: in.SessionID, state: in.State}
	a, err := roundTrip(ctx, p, c, BuildPromptInput{Message: in.Message, SessionID: in.SessionID}, answerOf[llm.Content])
	return a.value, a.ok, p.ordinary(ctx, err)
}

// SaveState forwards save_state.
func (p *Plugin) SaveState(ctx context.Context, in hooks.SaveStateInput) error {
	c := call{hook: hooks.HookSaveState, sessionID: in.SessionID, state: in.State}
	wire := SaveStateInput{SessionID: in.SessionID, Message: in.Message, ModelOutput: in.ModelOutput, Error: WireError(in.Err)}
	_, err := roundTrip(ctx, p, c, wire, (*Reply).none)
	return p.ordinary(ctx, err)
}

// RenderOutbound forwards render_outbound.
func (p *Plugin) RenderOutbound(ctx context.Context, in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
	c := call{hook: hooks.HookRenderOutbound, sessionID: in.SessionID, state: in.State}
	wire := RenderOutboundInput{Message: in.Message, SessionID: in.SessionID, ModelOutput: in.ModelOutput}
	a, err := roundTrip(ctx, p, c, wire, answerOf[[]*envelope.Envelope])
	return a.value, p.ordinary(ctx, err)
}

// DispatchOutbound forwards dispatch_outbound.
func (p *Plugin) DispatchOutbound(ctx context.Context, in hooks.DispatchOutboundInput) (bool, error) {
	c := call{hook: hooks.HookDispatchOutbound}
	if in.Message != nil {
		c.sessionID = in.Message.SessionID
	}
	a, err := roundTrip(ctx, p, c, in, answerOf[bool])
	return a.value, p.ordinary(ctx, err)
}

// ProvideRuntimeOptions forwards provide_runtime_options.
func (p *Plugin) ProvideRuntimeOptions(ctx context.Context, in hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
	a, err := roundTrip(ctx, p, call{hook: hooks.HookProvideRuntimeOptions, sessionID: in.SessionID}, in, answerOf[*hooks.RuntimeOptions])
	return a.value, p.ordinary(ctx, err)
}

// OnError forwards on_error. The registry logs its failures.
func (p *Plugin) OnError(ctx context.Context, in hooks.OnErrorInput) error {
	c := call{hook: hooks.HookOnError}
	if in.Message != nil {
		c.sessionID = in.Message.SessionID
	}
	_, err := roundTrip(ctx, p, c, OnErrorInput{Stage: in.Stage, Error: WireError(in.Err), Message: in.Message}, (*Reply).none)
	return err
}

// SystemPrompt forwards system_prompt.
func (p *Plugin) SystemPrompt(ctx context.Context, in hooks.SystemPromptInput) (string, error) {
	c := call{hook: hooks.HookSystemPrompt, state: in.State}
	a, err := roundTrip(ctx, p, c, SystemPromptInput{Prompt: in.Prompt}, answerOf[string])
	return a.value, p.ordinary(ctx, err)
}

// AdmitMessage forwards admit_message.
func (p *Plugin) AdmitMessage(ctx context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
	a, err := roundTrip(ctx, p, call{hook: hooks.HookAdmitMessage, sessionID: in.SessionID}, in, admitDecision)
	return a.value, a.ok, p.ordinary(ctx, err)
}

// BeforeLLMCall forwards before_llm_call. A failure fails open as an error
// the registry isolates, or fails closed by aborting the call.
func (p *Plugin) BeforeLLMCall(ctx context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	c := call{hook: hooks.HookBeforeLLMCall, runID: in.Request.RunID, state: in.State}
	d, err := roundTrip(ctx, p, c, BeforeLLMCallInput{Request: in.Request}, (*Reply).llmDecision)
	if err != nil && p.failsClosed(err) {
		return nil, nil, fmt.Errorf("%w: %w: %w", hooks.ErrAbort, p.abort(err), err)
	}
	return d.request, d.finish, err
}

// AfterLLMCall forwards after_llm_call. The registry isolates its
// failures.
func (p *Plugin) AfterLLMCall(ctx context.Context, in hooks.AfterLLMCallInput) error {
	c := call{hook: hooks.HookAfterLLMCall, runID: in.Request.RunID, state: in.State}
	wire := AfterLLMCallInput{Request: in.Request, Result: LLMResult{Result: in.Result, Error: WireError(in.Result.Err)}}
	_, err := roundTrip(ctx, p, c, wire, (*Reply).none)
	return err
}

// BeforeToolCall forwards before_tool_call. A failure fails open as an
// error the registry isolates, or fails closed by denying the call.
func (p *Plugin) BeforeToolCall(ctx context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	c := call{hook: hooks.HookBeforeToolCall, runID: in.Call.RunID, state: in.State}
	d, err := roundTrip(ctx, p, c, BeforeToolCallInput{Call: in.Call}, (*Reply).toolDecision)
	if err != nil && p.failsClosed(err) {
		msg := p.denial(err)
		p.log.LogAttrs(ctx, slog.LevelWarn, "interceptor.denied", slog.String("tool", in.Call.Tool),
			slog.String("outcome", string(outcomeOf(err))), slog.Any("err", err))
		return tools.Deny(msg), nil
	}
	return d, err
}

// AfterToolCall forwards after_tool_call; a result the interceptor
// assigned replaces in.Result.Result. The registry isolates its failures.
func (p *Plugin) AfterToolCall(ctx context.Context, in hooks.AfterToolCallInput) error {
	c := call{hook: hooks.HookAfterToolCall, runID: in.Call.RunID, state: in.State}
	var res ToolResult
	if in.Result != nil {
		res = ToolResult{Result: *in.Result, Error: WireError(in.Result.Err)}
	}
	r, err := roundTrip(ctx, p, c, AfterToolCallInput{Call: in.Call, Result: res}, (*Reply).newResult)
	if err == nil && r.set && in.Result != nil {
		in.Result.Result = r.value
	}
	return err
}

// ContinuePrompt forwards continue_prompt.
func (p *Plugin) ContinuePrompt(ctx context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
	c := call{hook: hooks.HookContinuePrompt, runID: in.RunID, sessionID: in.SessionID, state: in.State}
	wire := ContinuePromptInput{Step: in.Step, Prompt: in.Prompt, Usage: in.Usage}
	a, err := roundTrip(ctx, p, c, wire, answerOf[string])
	return a.value, a.ok, p.ordinary(ctx, err)
}
