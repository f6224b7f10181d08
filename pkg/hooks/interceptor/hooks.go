package interceptor

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
)

// This file maps each hook's request onto the plugin's method and its
// result onto a reply; remote.Plugin is the other half.

// state is the turn state of a request.
func state(m map[string]any) *bub.State { return bub.NewState(m) }

// answer is the reply of a firstresult or broadcast hook.
func answer(v any, ok bool) (remote.Reply, error) {
	if !ok {
		return remote.Reply{}, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return remote.Reply{}, err
	}
	return remote.Reply{Answer: raw, OK: &ok}, nil
}

// handler returns the endpoint handler of hook h, which the plugin
// implements.
func (s *Service) handler(h hooks.Hook) micro.Handler {
	p := s.plugin
	switch h {
	case hooks.HookResolveSession:
		impl, _ := hooks.As[hooks.SessionResolver](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[hooks.ResolveSessionInput]) (remote.Reply, error) {
			id, ok, err := impl.ResolveSession(ctx, r.Input)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(id, ok)
		})
	case hooks.HookLoadState:
		impl, _ := hooks.As[hooks.StateLoader](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[hooks.LoadStateInput]) (remote.Reply, error) {
			m, err := impl.LoadState(ctx, r.Input)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(m, m != nil)
		})
	case hooks.HookBuildPrompt:
		impl, _ := hooks.As[hooks.PromptBuilder](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.BuildPromptInput]) (remote.Reply, error) {
			in := hooks.BuildPromptInput{Message: r.Input.Message, SessionID: r.Input.SessionID, State: state(r.State)}
			prompt, ok, err := impl.BuildPrompt(ctx, in)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(prompt, ok)
		})
	case hooks.HookSaveState:
		impl, _ := hooks.As[hooks.StateSaver](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.SaveStateInput]) (remote.Reply, error) {
			in := hooks.SaveStateInput{SessionID: r.Input.SessionID, State: state(r.State), Message: r.Input.Message,
				ModelOutput: r.Input.ModelOutput, Err: r.Input.Error.Err()}
			return remote.Reply{}, impl.SaveState(ctx, in)
		})
	case hooks.HookRenderOutbound:
		impl, _ := hooks.As[hooks.OutboundRenderer](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.RenderOutboundInput]) (remote.Reply, error) {
			in := hooks.RenderOutboundInput{Message: r.Input.Message, SessionID: r.Input.SessionID, State: state(r.State), ModelOutput: r.Input.ModelOutput}
			batch, err := impl.RenderOutbound(ctx, in)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(batch, len(batch) > 0)
		})
	case hooks.HookDispatchOutbound:
		impl, _ := hooks.As[hooks.OutboundDispatcher](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[hooks.DispatchOutboundInput]) (remote.Reply, error) {
			sent, err := impl.DispatchOutbound(ctx, r.Input)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(sent, true)
		})
	case hooks.HookProvideRuntimeOptions:
		impl, _ := hooks.As[hooks.RuntimeOptionsProvider](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[hooks.RuntimeOptionsInput]) (remote.Reply, error) {
			opts, err := impl.ProvideRuntimeOptions(ctx, r.Input)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(opts, opts != nil)
		})
	case hooks.HookOnError:
		impl, _ := hooks.As[hooks.ErrorObserver](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.OnErrorInput]) (remote.Reply, error) {
			in := hooks.OnErrorInput{Stage: r.Input.Stage, Err: r.Input.Error.Err(), Message: r.Input.Message}
			return remote.Reply{}, impl.OnError(ctx, in)
		})
	case hooks.HookSystemPrompt:
		impl, _ := hooks.As[hooks.SystemPrompter](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.SystemPromptInput]) (remote.Reply, error) {
			part, err := impl.SystemPrompt(ctx, hooks.SystemPromptInput{Prompt: r.Input.Prompt, State: state(r.State)})
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(part, part != "")
		})
	case hooks.HookAdmitMessage:
		impl, _ := hooks.As[hooks.MessageAdmitter](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[hooks.AdmitMessageInput]) (remote.Reply, error) {
			d, ok, err := impl.AdmitMessage(ctx, r.Input)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(d, ok)
		})
	case hooks.HookBeforeLLMCall:
		impl, _ := hooks.As[hooks.LLMCallInterceptor](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.BeforeLLMCallInput]) (remote.Reply, error) {
			req, dec, err := impl.BeforeLLMCall(ctx, hooks.BeforeLLMCallInput{Request: r.Input.Request, State: state(r.State)})
			if dec != nil {
				req = nil // finish wins, as in the registry
			}
			return remote.Reply{Request: req, Finish: dec}, err
		})
	case hooks.HookAfterLLMCall:
		impl, _ := hooks.As[hooks.LLMCallObserver](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.AfterLLMCallInput]) (remote.Reply, error) {
			res := r.Input.Result.Result
			res.Err = r.Input.Result.Error.Err()
			return remote.Reply{}, impl.AfterLLMCall(ctx, hooks.AfterLLMCallInput{Request: r.Input.Request, Result: res, State: state(r.State)})
		})
	case hooks.HookBeforeToolCall:
		impl, _ := hooks.As[hooks.ToolCallInterceptor](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.BeforeToolCallInput]) (remote.Reply, error) {
			d, err := impl.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: r.Input.Call, State: state(r.State)})
			return remote.Reply{Decision: remote.WireDecision(d)}, err
		})
	case hooks.HookAfterToolCall:
		impl, _ := hooks.As[hooks.ToolCallObserver](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.AfterToolCallInput]) (remote.Reply, error) {
			res := r.Input.Result.Result
			res.Err = r.Input.Result.Error.Err()
			before := copyJSON(res.Result)
			if err := impl.AfterToolCall(ctx, hooks.AfterToolCallInput{Call: r.Input.Call, Result: &res, State: state(r.State)}); err != nil {
				return remote.Reply{}, err
			}
			if reflect.DeepEqual(before, res.Result) {
				return remote.Reply{}, nil
			}
			raw, err := json.Marshal(res.Result)
			return remote.Reply{Result: raw}, err
		})
	case hooks.HookContinuePrompt:
		impl, _ := hooks.As[hooks.PromptContinuer](p)
		return endpoint(s, h, func(ctx context.Context, r *remote.Request[remote.ContinuePromptInput]) (remote.Reply, error) {
			in := hooks.ContinuePromptInput{RunID: r.RunID, SessionID: r.SessionID, Step: r.Input.Step, Prompt: r.Input.Prompt,
				State: state(r.State), Usage: r.Input.Usage}
			prompt, ok, err := impl.ContinuePrompt(ctx, in)
			if err != nil {
				return remote.Reply{}, err
			}
			return answer(prompt, ok)
		})
	}
	panic("interceptor: no handler for hook " + string(h)) // Serve filters hooks with remote.Serves
}

// copyJSON deep-copies a decoded JSON value, so that a plugin changing a
// map or slice in place is noticed.
func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = copyJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = copyJSON(x)
		}
		return out
	}
	return v
}
