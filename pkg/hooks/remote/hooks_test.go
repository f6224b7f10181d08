package remote_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// everything implements every hook an interceptor can serve and records
// what it saw, as text that survives a JSON hop.
type everything struct {
	mu   sync.Mutex
	seen map[hooks.Hook]string
}

func (*everything) Name() string { return "everything" }

func (p *everything) see(h hooks.Hook, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[h] = fmt.Sprintf(format, args...)
}

func kindOf(err error) string {
	if be, ok := errors.AsType[*bub.Error](err); ok {
		return string(be.Kind) + ":" + be.Message
	}
	return fmt.Sprint(err)
}

func (p *everything) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	return "tenant:" + in.Message.ChatID, true, nil
}

func (p *everything) LoadState(_ context.Context, in hooks.LoadStateInput) (map[string]any, error) {
	return map[string]any{"loaded_for": in.SessionID}, nil
}

func (p *everything) BuildPrompt(_ context.Context, in hooks.BuildPromptInput) (llm.Content, bool, error) {
	return llm.Content{Parts: []llm.Part{{Type: "text", Text: "mode " + in.State.String("mode")}}}, true, nil
}

func (p *everything) SaveState(_ context.Context, in hooks.SaveStateInput) error {
	p.see(hooks.HookSaveState, "%s %s %s %s", in.SessionID, in.ModelOutput, in.State.String("mode"), kindOf(in.Err))
	return nil
}

func (p *everything) RenderOutbound(_ context.Context, in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
	return []*envelope.Envelope{{ID: "o1", Content: in.ModelOutput + "!", SessionID: in.SessionID}}, nil
}

func (p *everything) DispatchOutbound(_ context.Context, in hooks.DispatchOutboundInput) (bool, error) {
	return in.Message.ID == "o1", nil
}

func (p *everything) ProvideRuntimeOptions(_ context.Context, in hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
	return &hooks.RuntimeOptions{Models: []hooks.ModelChoice{{ID: "openai:" + in.SessionID}}, Current: "openai:" + in.SessionID}, nil
}

func (p *everything) OnError(_ context.Context, in hooks.OnErrorInput) error {
	p.see(hooks.HookOnError, "%s %s %s", in.Stage, kindOf(in.Err), in.Message.ID)
	return nil
}

func (p *everything) SystemPrompt(_ context.Context, in hooks.SystemPromptInput) (string, error) {
	return "be brief about " + in.Prompt + " in " + in.State.String("mode"), nil
}

func (p *everything) AdmitMessage(_ context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
	return hooks.AdmitDecision{Action: hooks.AdmitFollowUp, Reason: fmt.Sprint(in.Turn.RunningCount)}, in.Turn.IsRunning, nil
}

func (p *everything) BeforeLLMCall(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	return nil, llm.Finish("cached for " + in.Request.Model), nil
}

func (p *everything) AfterLLMCall(_ context.Context, in hooks.AfterLLMCallInput) error {
	p.see(hooks.HookAfterLLMCall, "%s %s %s", in.Request.Model, in.Result.Text, kindOf(in.Result.Err))
	return nil
}

func (p *everything) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return tools.Replace(map[string]any{"cached": in.Call.Tool}), nil
}

func (p *everything) AfterToolCall(_ context.Context, in hooks.AfterToolCallInput) error {
	p.see(hooks.HookAfterToolCall, "%s %v %s", in.Call.Tool, in.Result.Result, kindOf(in.Result.Err))
	in.Result.Result = []any{"rewritten", in.Result.Result}
	return nil
}

func (p *everything) ContinuePrompt(_ context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
	return fmt.Sprintf("continue %s/%s after step %d (%s)", in.SessionID, in.RunID, in.Step, in.Prompt.PlainText()), true, nil
}

// dispatchAll calls every servable hook through reg and returns what each
// dispatch returned.
func dispatchAll(t *testing.T, reg *hooks.Registry[struct{}, struct{}]) map[hooks.Hook]any {
	t.Helper()
	ctx := t.Context()
	st := func() *bub.State {
		return bub.NewState(map[string]any{bub.StateSessionID: "s1", "mode": "terse", "_runtime_secret": "x"})
	}
	msg := &envelope.Envelope{ID: "m1", Content: "hi", Channel: "http", ChatID: "42"}
	out := map[hooks.Hook]any{}
	r := func(h hooks.Hook, vals ...any) { out[h] = vals }
	id, err := reg.ResolveSession(ctx, hooks.ResolveSessionInput{Message: msg})
	r(hooks.HookResolveSession, id, err)
	state := st()
	err = reg.LoadState(ctx, hooks.LoadStateInput{Message: msg, SessionID: "s1"}, state)
	r(hooks.HookLoadState, state.Snapshot(), err)
	prompt, err := reg.BuildPrompt(ctx, hooks.BuildPromptInput{Message: msg, SessionID: "s1", State: st()})
	r(hooks.HookBuildPrompt, prompt, err)
	err = reg.SaveState(ctx, hooks.SaveStateInput{SessionID: "s1", State: st(), Message: msg, ModelOutput: "out", Err: bub.Errorf(bub.KindProvider, "down")})
	r(hooks.HookSaveState, err)
	batch, err := reg.RenderOutbound(ctx, hooks.RenderOutboundInput{Message: msg, SessionID: "s1", State: st(), ModelOutput: "out"})
	r(hooks.HookRenderOutbound, batch, err)
	sent, err := reg.DispatchOutbound(ctx, hooks.DispatchOutboundInput{Message: batch[0]})
	r(hooks.HookDispatchOutbound, sent, err)
	opts, err := reg.RuntimeOptions(ctx, hooks.RuntimeOptionsInput{SessionID: "s1"})
	r(hooks.HookProvideRuntimeOptions, opts, err)
	reg.NotifyError(ctx, hooks.OnErrorInput{Stage: "model", Err: bub.Errorf(bub.KindTool, "boom"), Message: msg})
	sys, err := reg.SystemPrompt(ctx, hooks.SystemPromptInput{Prompt: "tea", State: st()})
	r(hooks.HookSystemPrompt, sys, err)
	adm, err := reg.AdmitMessage(ctx, hooks.AdmitMessageInput{SessionID: "s1", Message: msg, Turn: hooks.TurnSnapshot{IsRunning: true, RunningCount: 2}})
	r(hooks.HookAdmitMessage, adm, err)
	req, dec, err := reg.BeforeLLMCall(ctx, hooks.BeforeLLMCallInput{Request: llm.Request{RunID: "r1", Model: "openai:m"}, State: st()})
	r(hooks.HookBeforeLLMCall, req, dec, err)
	err = reg.AfterLLMCall(ctx, hooks.AfterLLMCallInput{Request: llm.Request{Model: "openai:m"}, Result: llm.Result{Text: "t", Err: bub.Errorf(bub.KindProvider, "eof")}, State: st()})
	r(hooks.HookAfterLLMCall, err)
	call, tdec, err := reg.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: tools.Call{Tool: "fs_read", Arguments: map[string]any{}}, State: st()})
	r(hooks.HookBeforeToolCall, call, tdec, err)
	res := &tools.Result{Tool: "fs_read", Result: "text", Err: &bub.Error{Kind: bub.KindTool, Message: "partial", Details: map[string]any{"line": 3.0}}}
	err = reg.AfterToolCall(ctx, hooks.AfterToolCallInput{Call: tools.Call{Tool: "fs_read"}, Result: res, State: st()})
	r(hooks.HookAfterToolCall, res.Result, err)
	next, err := reg.ContinuePrompt(ctx, hooks.ContinuePromptInput{RunID: "r1", SessionID: "s1", Step: 2, Prompt: llm.Text("go"), State: st()})
	r(hooks.HookContinuePrompt, next, err)
	return out
}

// TestEveryHookRoundTrips: every hook an interceptor can serve gives the
// same results, and the plugin sees the same inputs, whether the plugin is
// registered locally or served over NATS.
func TestEveryHookRoundTrips(t *testing.T) {
	local := &everything{seen: map[hooks.Hook]string{}}
	reg := hooks.New[struct{}, struct{}]()
	reg.MustRegister(local)
	want := dispatchAll(t, reg)

	e := newEnv(t)
	served := &everything{seen: map[hooks.Hook]string{}}
	e.serve(t, "everything", served)
	p, rreg, logs := e.client(t, remote.Config{Service: "everything"})
	for _, h := range remote.Hooks() {
		if !p.ServesHook(h) {
			t.Errorf("%s not discovered", h)
		}
	}
	got := dispatchAll(t, rreg)
	for _, h := range remote.Hooks() {
		if !reflect.DeepEqual(got[h], want[h]) {
			t.Errorf("%s: remote %#v, local %#v", h, got[h], want[h])
		}
	}
	if !reflect.DeepEqual(served.seen, local.seen) {
		t.Errorf("served plugin saw %q, local plugin saw %q", served.seen, local.seen)
	}
	if st := p.Stats(); st.OK != uint64(len(remote.Hooks())) {
		t.Errorf("stats = %+v, want %d ok", st, len(remote.Hooks()))
	}
	if l := logs.get(); len(l) > 0 {
		t.Errorf("unexpected logs %q", l)
	}
}
