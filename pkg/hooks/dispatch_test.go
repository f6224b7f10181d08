package hooks_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// One test per rule of docs/hooks.md's "How hooks are called".

// Iteration order: the most recently registered plugin runs first, so the
// builtin (registered first) runs last — except onboard_config.
func TestRuleIterationOrderIsLIFO(t *testing.T) {
	var j journal
	plugin := func(name string) *fake {
		return &fake{
			name: name,
			dispatchOutbound: func(hooks.DispatchOutboundInput) (bool, error) {
				j.add("dispatch:" + name)
				return false, nil
			},
			onboardConfig: func(hooks.OnboardConfigInput) (map[string]any, error) {
				j.add("onboard:" + name)
				return nil, nil
			},
		}
	}
	r := newRegistry(t, nil, plugin("builtin"), plugin("a"), plugin("b"))
	must[bool](t)(r.DispatchOutbound(t.Context(), hooks.DispatchOutboundInput{Message: &envelope.Envelope{}}))
	must[map[string]any](t)(r.Startup().OnboardConfig(t.Context(), hooks.OnboardConfigInput{}))
	equal(t, "calls", j.get(), []string{
		"dispatch:b", "dispatch:a", "dispatch:builtin",
		"onboard:builtin", "onboard:a", "onboard:b",
	})
}

// call_first stops at the first answer, even an empty one; call_many runs
// every implementation and keeps every result.
func TestRuleCallFirstVersusCallMany(t *testing.T) {
	var j journal
	plugin := func(name, prompt string) *fake {
		return &fake{
			name: name,
			systemPrompt: func(hooks.SystemPromptInput) (string, error) {
				j.add("many:" + name)
				return prompt, nil
			},
			resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) {
				j.add("first:" + name)
				return "", name == "empty", nil
			},
		}
	}
	r := newRegistry(t, nil, plugin("low", "low"), plugin("empty", ""), plugin("quiet", "quiet"))
	equal(t, "session", must[string](t)(r.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: msg()})), "telegram:42")
	equal(t, "system prompt", must[string](t)(r.SystemPrompt(t.Context(), hooks.SystemPromptInput{})), "low\n\nquiet")
	equal(t, "calls", j.get(), []string{"first:quiet", "first:empty", "many:quiet", "many:empty", "many:low"})
}

// A resolve_session answer longer than envelope.MaxNameBytes is an error
// (session ids become subject tokens); one of that length is not.
func TestResolveSessionBoundsTheID(t *testing.T) {
	for n, ok := range map[int]bool{envelope.MaxNameBytes: true, envelope.MaxNameBytes + 1: false} {
		id := strings.Repeat("s", n)
		r := newRegistry(t, nil, &fake{name: "resolver", resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) {
			return id, true, nil
		}})
		got, err := r.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: msg()})
		if ok && (err != nil || got != id) {
			t.Errorf("an id of %d bytes: %q, %v", n, got, err)
		}
		if !ok && (!errors.Is(err, envelope.ErrNameTooLong) || !strings.Contains(err.Error(), "resolve_session: session id of 257 bytes")) {
			t.Errorf("an id of %d bytes: %q, %v, want a resolve_session error", n, got, err)
		}
	}
}

// Startup-only: Bub's sync-only hooks are dispatched through
// Registry.Startup (or, for the tape store and steering inbox, OpenScope),
// never through the per-turn method set.
func TestRuleStartupHooksHaveTheirOwnMethodSet(t *testing.T) {
	turn := reflect.TypeFor[*registry]()
	startup := reflect.TypeFor[hooks.Startup[*memStore, tapeCtx]]()
	for _, m := range []string{"RegisterCLICommands", "OnboardConfig", "Channels", "TapeContext"} {
		if _, ok := turn.MethodByName(m); ok {
			t.Errorf("Registry has the startup dispatcher %s", m)
		}
		if _, ok := startup.MethodByName(m); !ok {
			t.Errorf("Startup lacks %s", m)
		}
	}
	for _, s := range hooks.Specs() {
		sync := slices.Contains([]hooks.Hook{
			hooks.HookRegisterCLICommands, hooks.HookOnboardConfig, hooks.HookProvideChannels,
			hooks.HookProvideTapeStore, hooks.HookBuildTapeContext, hooks.HookProvideSteeringInbox,
		}, s.Hook)
		if sync != (s.Phase != hooks.PhaseTurn) {
			t.Errorf("%s is in phase %s", s.Hook, s.Phase)
		}
	}
}

type onlyResolver struct{ named }

func (onlyResolver) ResolveSession(context.Context, hooks.ResolveSessionInput) (string, bool, error) {
	return "only", true, nil
}

// wrapper wraps a plugin and adds its own dispatch_outbound.
type wrapper struct {
	inner hooks.Plugin
	j     *journal
}

func (w wrapper) Name() string         { return "wrapped." + w.inner.Name() }
func (w wrapper) Unwrap() hooks.Plugin { return w.inner }

func (w wrapper) DispatchOutbound(context.Context, hooks.DispatchOutboundInput) (bool, error) {
	w.j.add("wrapper")
	return true, nil
}

// Argument shape: Python prunes keyword arguments per implementation; in Go
// every hook takes one input struct, so a plugin implements exactly the
// hooks it has methods for. A wrapper never hides its plugin's hooks
// (Unwrap), and a selector can hide methods a plugin does not serve.
func TestRuleArgumentShapeAndCapabilities(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[hooks.SessionResolver](), reflect.TypeFor[hooks.StateLoader](),
		reflect.TypeFor[hooks.PromptBuilder](), reflect.TypeFor[hooks.ModelRunner](),
		reflect.TypeFor[hooks.ModelStreamer](), reflect.TypeFor[hooks.StateSaver](),
		reflect.TypeFor[hooks.OutboundRenderer](), reflect.TypeFor[hooks.OutboundDispatcher](),
		reflect.TypeFor[hooks.CLICommandRegistrar](), reflect.TypeFor[hooks.ConfigOnboarder](),
		reflect.TypeFor[hooks.RuntimeOptionsProvider](), reflect.TypeFor[hooks.ErrorObserver](),
		reflect.TypeFor[hooks.SystemPrompter](), reflect.TypeFor[hooks.TapeStoreProvider[*memStore]](),
		reflect.TypeFor[hooks.ChannelProvider](), reflect.TypeFor[hooks.TapeContextBuilder[tapeCtx]](),
		reflect.TypeFor[hooks.MessageAdmitter](), reflect.TypeFor[hooks.LLMCallInterceptor](),
		reflect.TypeFor[hooks.LLMCallObserver](), reflect.TypeFor[hooks.ToolCallInterceptor](),
		reflect.TypeFor[hooks.ToolCallObserver](), reflect.TypeFor[hooks.PromptContinuer](),
		reflect.TypeFor[hooks.SteeringInboxProvider](),
	} {
		m := typ.Method(0)
		if typ.NumMethod() != 1 || m.Type.NumIn() != 2 || m.Type.In(0) != reflect.TypeFor[context.Context]() ||
			m.Type.In(1).Kind() != reflect.Struct || m.Type.Out(m.Type.NumOut()-1) != reflect.TypeFor[error]() {
			t.Errorf("%s.%s is not (ctx, input struct) → (…, error)", typ, m.Name)
		}
	}

	var j journal
	only := onlyResolver{"only"}
	r := newRegistry(t, nil, named("none"), wrapper{inner: only, j: &j}, &fake{name: "selector", dispatchOutbound: nil})
	equal(t, "hooks of a plain plugin", hooks.HooksOf[*memStore, tapeCtx](only), []hooks.Hook{hooks.HookResolveSession})
	equal(t, "hooks of a wrapper", hooks.HooksOf[*memStore, tapeCtx](wrapper{inner: only}), []hooks.Hook{hooks.HookResolveSession, hooks.HookDispatchOutbound})
	equal(t, "hooks of a selector that serves none", hooks.HooksOf[*memStore, tapeCtx](&fake{name: "x"}), []hooks.Hook(nil))
	equal(t, "session through the wrapper", must[string](t)(r.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: msg()})), "only")
	equal(t, "sent through the wrapper", must[bool](t)(r.DispatchOutbound(t.Context(), hooks.DispatchOutboundInput{})), true)
	equal(t, "calls", j.get(), []string{"wrapper"})
}

// Tape store lifecycle beyond check 16: one scope at a time, failures
// while opening leak nothing, and a scope reopens with a fresh store.
func TestRuleTapeStoreLifecycle(t *testing.T) {
	var stores []*memStore
	inboxErr := errors.New("inbox down")
	failInbox := false
	r := newRegistry(t, nil, &fake{
		name: "builtin",
		tapeStore: func() (*memStore, bool, error) {
			stores = append(stores, &memStore{})
			return stores[len(stores)-1], true, nil
		},
		steeringInbox: func() (hooks.SteeringInbox, bool, error) {
			if failInbox {
				return nil, false, inboxErr
			}
			return nil, false, nil
		},
	})
	scope := must[*hooks.Scope[*memStore]](t)(r.OpenScope(t.Context()))
	if _, err := r.OpenScope(t.Context()); !errors.Is(err, hooks.ErrScopeOpen) {
		t.Fatalf("second OpenScope: %v, want ErrScopeOpen", err)
	}
	equal(t, "nil inbox is not closed", scope.Close(t.Context()), error(nil))
	equal(t, "second close", scope.Close(t.Context()), error(nil))
	equal(t, "first store closed", stores[0].closed, 1)

	failInbox = true
	if _, err := r.OpenScope(t.Context()); !errors.Is(err, inboxErr) {
		t.Fatalf("OpenScope with a failing inbox: %v", err)
	}
	equal(t, "store of the failed scope closed", stores[1].closed, 1)
	if r.TapeStore() != nil {
		t.Error("a failed scope left a store behind")
	}

	failInbox = false
	scope = must[*hooks.Scope[*memStore]](t)(r.OpenScope(t.Context()))
	if r.TapeStore() != stores[2] {
		t.Error("a reopened scope does not resolve a fresh store")
	}
	if err := scope.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// on_error safety: every observer runs even when some fail or panic, and
// NotifyError has no error to return, so the original error is never
// hidden.
func TestRuleOnErrorSafety(t *testing.T) {
	TestBehaviour08_OnErrorObserverFailureIsIsolated(t)
	if typ := reflect.TypeFor[*registry](); func() bool {
		m, _ := typ.MethodByName("NotifyError")
		return m.Type.NumOut() != 0
	}() {
		t.Error("NotifyError returns something")
	}
}

// Error isolation: ordinary hooks propagate the first error or panic as a
// *HookError naming the plugin and stop; on_error and the agent-loop hooks
// log and go on (see also package hookstest).
func TestRuleErrorIsolation(t *testing.T) {
	boom := errors.New("boom")
	for _, failure := range []struct {
		name  string
		fail  func() error
		check func(t *testing.T, err error)
	}{
		{"error", func() error { return boom }, func(t *testing.T, err error) {
			if !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the plugin's error", err)
			}
		}},
		{"panic", func() error { panic("bug") }, func(t *testing.T, err error) {
			pe, ok := errors.AsType[*hooks.PanicError](err)
			if !ok || pe.Value != "bug" || !strings.Contains(string(pe.Stack), "dispatch_test.go") {
				t.Errorf("error %v is not a PanicError with a stack", err)
			}
		}},
	} {
		t.Run(failure.name, func(t *testing.T) {
			var j journal
			bad := &fake{
				name:             "bad",
				resolveSession:   func(hooks.ResolveSessionInput) (string, bool, error) { return "", false, failure.fail() },
				dispatchOutbound: func(hooks.DispatchOutboundInput) (bool, error) { return false, failure.fail() },
				saveState:        func(hooks.SaveStateInput) error { return failure.fail() },
				beforeTool:       func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, failure.fail() },
				afterLLM:         func(hooks.AfterLLMCallInput) error { return failure.fail() },
			}
			good := &fake{
				name:             "good",
				resolveSession:   func(hooks.ResolveSessionInput) (string, bool, error) { j.add("resolve"); return "s", true, nil },
				dispatchOutbound: func(hooks.DispatchOutboundInput) (bool, error) { j.add("dispatch"); return true, nil },
				saveState:        func(hooks.SaveStateInput) error { j.add("save"); return nil },
				beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
					j.add("before")
					return tools.Deny("no"), nil
				},
				afterLLM: func(hooks.AfterLLMCallInput) error { j.add("after"); return nil },
			}
			r := newRegistry(t, nil, good, bad)
			ctx := t.Context()
			_, err1 := r.ResolveSession(ctx, hooks.ResolveSessionInput{Message: msg()})
			_, err2 := r.DispatchOutbound(ctx, hooks.DispatchOutboundInput{})
			err3 := r.SaveState(ctx, hooks.SaveStateInput{})
			for i, err := range []error{err1, err2, err3} {
				he, ok := errors.AsType[*hooks.HookError](err)
				if !ok || he.Plugin != "bad" {
					t.Fatalf("ordinary hook %d: error %v, want a HookError of plugin bad", i, err)
				}
				failure.check(t, err)
			}
			_, dec, err := r.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: toolCall()})
			if err != nil || dec == nil || dec.Action != tools.ActionDeny {
				t.Errorf("before_tool_call: %v, %v; want the good plugin's deny", dec, err)
			}
			if err := r.AfterLLMCall(ctx, hooks.AfterLLMCallInput{}); err != nil {
				t.Errorf("after_llm_call: %v", err)
			}
			equal(t, "calls", j.get(), []string{"before", "after"})
		})
	}
}

// Fail-closed policies return ErrAbort: it stops the call instead of
// being skipped. Cancellation is not a plugin failure either.
func TestRuleAbortAndCancellationStopAgentHooks(t *testing.T) {
	var j journal
	lower := &fake{
		name: "lower",
		beforeLLM: func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			j.add("lower")
			return nil, nil, nil
		},
		beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) { j.add("lower"); return nil, nil },
		afterTool:  func(hooks.AfterToolCallInput) error { j.add("lower"); return nil },
	}
	var decisions []hooks.DecisionRecord
	observe := hooks.WithDecisionObserver(func(_ context.Context, rec hooks.DecisionRecord) { decisions = append(decisions, rec) })
	r := newRegistry(t, []hooks.Option{observe}, lower, &fake{
		name: "policy",
		beforeLLM: func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			return nil, nil, errors.Join(hooks.ErrAbort, errors.New("policy service unreachable"))
		},
		beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			return nil, errors.New("policy failed")
		},
		afterTool: func(hooks.AfterToolCallInput) error { return errors.New("observer failed") },
	})
	_, _, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request()})
	if he, ok := errors.AsType[*hooks.HookError](err); !ok || he.Plugin != "policy" || !errors.Is(err, hooks.ErrAbort) {
		t.Errorf("BeforeLLMCall error = %v, want the policy's ErrAbort", err)
	}
	// The abort is shown as Bub's error, naming the hook and the plugin,
	// and recorded as a decision like a denial.
	want := `before_llm_call: plugin "policy" aborted the call: policy service unreachable`
	if be := bub.AsError(err); be.Message != want {
		t.Errorf("abort shown as %q, want %q", be.Message, want)
	}
	if len(decisions) != 1 || decisions[0].Verdict != hooks.VerdictAbort || decisions[0].Plugin != "policy" || decisions[0].Err == nil {
		t.Errorf("decisions = %+v, want one abort by policy with its error", decisions)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := r.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: toolCall()}); !errors.Is(err, context.Canceled) {
		t.Errorf("BeforeToolCall on a cancelled context = %v", err)
	}
	if err := r.AfterToolCall(ctx, hooks.AfterToolCallInput{Result: &tools.Result{}}); !errors.Is(err, context.Canceled) {
		t.Errorf("AfterToolCall on a cancelled context = %v", err)
	}
	equal(t, "lower calls", j.get(), []string(nil))
}

// after_* dispatch: every implementation exactly once per dispatch, in
// priority order, failures and panics isolated and logged. (Firing once
// per completed call and never on cancellation is the agent loop's job.)
func TestRuleAfterHooksCallEveryImplementationOnce(t *testing.T) {
	var j journal
	observer := func(name string, fail func() error) *fake {
		return &fake{
			name:      name,
			afterLLM:  func(hooks.AfterLLMCallInput) error { j.add("llm:" + name); return fail() },
			afterTool: func(hooks.AfterToolCallInput) error { j.add("tool:" + name); return fail() },
		}
	}
	ok := func() error { return nil }
	opts, logs := logBuffer()
	r := newRegistry(t, opts,
		observer("a", ok),
		observer("panics", func() error { panic("bug") }),
		observer("fails", func() error { return errors.New("broken") }),
		observer("b", ok),
	)
	if err := r.AfterLLMCall(t.Context(), hooks.AfterLLMCallInput{}); err != nil {
		t.Fatal(err)
	}
	if err := r.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Result: &tools.Result{}}); err != nil {
		t.Fatal(err)
	}
	equal(t, "calls", j.get(), []string{
		"llm:b", "llm:fails", "llm:panics", "llm:a",
		"tool:b", "tool:fails", "tool:panics", "tool:a",
	})
	if n := strings.Count(logs.String(), "msg=hook.agent_hook_failed"); n != 4 {
		t.Errorf("%d failures logged, want 4:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "stack=") {
		t.Error("a panic was logged without its stack")
	}
}

// Model hooks: the highest-priority plugin with any model hook picks the
// path; the other shape is adapted.
func TestRuleModelPathIsChosenPerPlugin(t *testing.T) {
	var j journal
	text := &fake{name: "text", runModel: func(hooks.RunModelInput) (string, bool, error) {
		j.add("run_model")
		return "plain", true, nil
	}}
	stream := &fake{name: "stream", runModelStream: func(hooks.RunModelInput) (hooks.Stream, bool, error) {
		j.add("run_model_stream")
		return hooks.TextStream("streamed"), true, nil
	}}
	in := hooks.RunModelInput{Prompt: llm.Text("hi")}

	r := newRegistry(t, nil, text, stream)
	out, _, _ := r.RunModel(t.Context(), in)
	equal(t, "stream plugin on top, non-streaming call", out, "streamed")
	r = newRegistry(t, nil, stream, text)
	s, _, _ := r.RunModelStream(t.Context(), in)
	out, _ = s.Text()
	equal(t, "text plugin on top, streaming call", out, "plain")
	equal(t, "calls", j.get(), []string{"run_model_stream", "run_model"})

	if _, ok, err := newRegistry(t, nil).RunModel(t.Context(), in); ok || err != nil {
		t.Errorf("RunModel without model hooks = %v, %v", ok, err)
	}
	quiet := &fake{name: "quiet", runModelStream: func(hooks.RunModelInput) (hooks.Stream, bool, error) { return nil, false, nil }}
	if _, _, err := newRegistry(t, nil, quiet).RunModel(t.Context(), in); !errors.Is(err, hooks.ErrNoAnswer) {
		t.Errorf("RunModel with a stream plugin that does not answer = %v, want ErrNoAnswer", err)
	}
	if _, ok, err := newRegistry(t, nil, quiet).RunModelStream(t.Context(), in); ok || err != nil {
		t.Errorf("RunModelStream without an answer = %v, %v", ok, err)
	}
}

// A panic inside a plugin's stream becomes the stream's last error; a
// panic in the consumer's loop body is the consumer's and propagates.
func TestRuleStreamPanicsAreRecovered(t *testing.T) {
	r := newRegistry(t, nil, &fake{name: "buggy", runModelStream: func(hooks.RunModelInput) (hooks.Stream, bool, error) {
		return func(yield func(llm.Delta, error) bool) {
			if yield(llm.Delta{Kind: "text", Text: "a"}, nil) {
				panic("stream bug")
			}
		}, true, nil
	}})
	s, _, err := r.RunModelStream(t.Context(), hooks.RunModelInput{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Text()
	if he, ok := errors.AsType[*hooks.HookError](err); !ok || he.Plugin != "buggy" || he.Hook != hooks.HookRunModelStream {
		t.Errorf("stream error = %v, want a HookError of buggy", err)
	}
	defer func() {
		if v := recover(); v != "consumer bug" {
			t.Errorf("recovered %v, want the consumer's panic", v)
		}
	}()
	for range s {
		panic("consumer bug")
	}
}

// Decision audit: every decision that changed, stopped or failed a call is
// reported with the plugin, the verdict, the run id and the duration.
func TestRuleDecisionRecords(t *testing.T) {
	var records []hooks.DecisionRecord
	opts := []hooks.Option{hooks.WithDecisionObserver(func(_ context.Context, r hooks.DecisionRecord) {
		records = append(records, r)
	})}
	r := newRegistry(t, opts,
		&fake{name: "deny", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return tools.Deny("no"), nil }},
		&fake{name: "fails", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, errors.New("x") }},
		&fake{name: "quiet", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return tools.Proceed(nil), nil }},
		&fake{name: "args", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			for start := time.Now(); time.Since(start) == 0; { // let the clock tick
			}
			return tools.Proceed(map[string]any{"safe": true}), nil
		}},
		&fake{name: "bad", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			return &tools.Decision{Action: "maybe"}, nil
		}},
	)
	if _, _, err := r.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: toolCall()}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range records {
		if rec.RunID != "run-1" || rec.Hook != hooks.HookBeforeToolCall || rec.Duration < 0 {
			t.Errorf("record %+v lacks run id or hook", rec)
		}
		got = append(got, rec.Plugin+":"+string(rec.Verdict))
	}
	equal(t, "records", got, []string{"args:modify", "fails:failed", "deny:deny"})
	if records[0].Duration <= 0 {
		t.Errorf("modify record has duration %v", records[0].Duration)
	}
	equal(t, "deny decision", records[2].ToolDecision, tools.Deny("no"))
	if records[1].Err == nil || records[1].ToolDecision != nil {
		t.Errorf("failed record = %+v", records[1])
	}

	records = nil
	r = newRegistry(t, opts, &fake{name: "swap", beforeLLM: func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		req := in.Request.Clone()
		req.Model = "m"
		return &req, nil, nil
	}})
	must[llm.Request](t)(func() (llm.Request, error) {
		req, _, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request(), State: bub.NewState(nil)})
		return req, err
	}())
	if len(records) != 1 || records[0].Verdict != hooks.VerdictModify || records[0].Request.Model != "m" {
		t.Errorf("records = %+v, want one modify with the new request", records)
	}
}

func TestHookErrorMessage(t *testing.T) {
	err := &hooks.HookError{Hook: hooks.HookSaveState, Plugin: "db", Err: errors.New("disk full")}
	equal(t, "message", err.Error(), `hook save_state: plugin "db": disk full`)
}

// A before_llm_call request without tool names keeps the tools it was
// given (a remote reply that omits tool_names), an empty list withdraws
// them for the rest of the chain (Clone keeps it empty), and each modify
// record's changes are what that implementation changed: here only the
// system prompt, never a withdrawal it did not make.
func TestRuleBeforeLLMCallToolNames(t *testing.T) {
	var records []hooks.DecisionRecord
	opts := []hooks.Option{hooks.WithDecisionObserver(func(_ context.Context, r hooks.DecisionRecord) {
		records = append(records, r)
	})}
	system := func(text string) func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		return func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			req := in.Request.Clone()
			req.ToolNames = nil // as decoded from a reply without tool_names
			req.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: llm.Text(text)}}, req.Messages...)
			return &req, nil, nil
		}
	}
	withdraw := func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		req := in.Request.Clone()
		req.ToolNames = []string{}
		return &req, nil, nil
	}
	rewrite := func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		req := in.Request.Clone()
		req.Messages[0] = llm.Message{Role: llm.RoleSystem, Content: llm.Text("Be brief.")}
		return &req, nil, nil
	}
	in := request()
	in.ToolNames = []string{"bash", "fs_read"}
	for _, tc := range []struct {
		name   string
		plugin []hooks.Plugin
		want   []string
	}{
		// Registration order: the last registered runs first.
		{"absent keeps", []hooks.Plugin{&fake{name: "sys", beforeLLM: system("You are Bub.")}}, []string{"bash", "fs_read"}},
		{"empty withdraws", []hooks.Plugin{
			&fake{name: "rewrite", beforeLLM: rewrite},
			&fake{name: "withdraw", beforeLLM: withdraw},
			&fake{name: "sys", beforeLLM: system("You are Bub.")},
		}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records = nil
			r := newRegistry(t, opts, tc.plugin...)
			got, _, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: in, State: bub.NewState(nil)})
			if err != nil {
				t.Fatal(err)
			}
			if got.ToolNames == nil || !slices.Equal(got.ToolNames, tc.want) {
				t.Errorf("tool names %#v, want %#v", got.ToolNames, tc.want)
			}
			for _, rec := range records {
				changes := llm.Changes(*rec.Previous, *rec.Request)
				if _, ok := changes["tool_names"]; ok != (rec.Plugin == "withdraw") {
					t.Errorf("%s changed %v", rec.Plugin, changes)
				}
			}
		})
	}
}

func TestBeforeToolCallAskStopsTheChainAndAnInvalidAskIsSkipped(t *testing.T) {
	var j journal
	r := newRegistry(t, nil,
		&fake{name: "remaining", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			j.add("remaining")
			return nil, nil
		}},
		&fake{name: "ask", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			return tools.Ask("rm needs a person", time.Hour, tools.ActionDeny), nil
		}},
	)
	_, dec, err := r.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: toolCall()})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "decision", dec, &tools.Decision{Action: tools.ActionAsk, Message: "rm needs a person", TimeoutMS: 3600000, Default: tools.ActionDeny})
	equal(t, "remaining calls", j.get(), []string(nil))

	opts, logs := logBuffer()
	r = newRegistry(t, opts,
		&fake{name: "remaining", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			j.add("remaining")
			return nil, nil
		}},
		&fake{name: "bad-ask", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			return tools.Ask("no timeout", 0, tools.ActionDeny), nil
		}},
	)
	if _, dec, err = r.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: toolCall()}); err != nil || dec != nil {
		t.Fatalf("invalid ask: decision %v, error %v", dec, err)
	}
	equal(t, "remaining calls", j.get(), []string{"remaining"})
	if want := "adapter=bad-ask"; !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "timeout_ms must be positive") {
		t.Errorf("log lacks the invalid ask:\n%s", logs)
	}
}
