package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// TestSeedHookTable mirrors the hook table of docs/hooks.md row by row:
// each row checks the hook's kind, phase, error isolation and its fallback
// or merge rule.
func TestSeedHookTable(t *testing.T) {
	const (
		first     = hooks.KindFirstResult
		broadcast = hooks.KindBroadcast
		observer  = hooks.KindObserver
		chained   = hooks.KindChained
		turn      = hooks.PhaseTurn
		startup   = hooks.PhaseStartup
		scope     = hooks.PhaseScope
	)
	rows := []struct {
		hook     hooks.Hook
		kind     hooks.Kind
		phase    hooks.Phase
		isolated bool
		rule     func(t *testing.T)
	}{
		{hooks.HookResolveSession, first, turn, false, ruleResolveSession},
		{hooks.HookLoadState, broadcast, turn, false, ruleLoadState},
		{hooks.HookBuildPrompt, first, turn, false, ruleBuildPrompt},
		{hooks.HookRunModel, first, turn, false, TestBehaviour10_TextOnlyModelServesStreamingCalls},
		{hooks.HookRunModelStream, first, turn, false, TestBehaviour09_StreamOnlyModelServesNonStreamingCalls},
		{hooks.HookSaveState, broadcast, turn, false, ruleSaveState},
		{hooks.HookRenderOutbound, broadcast, turn, false, ruleRenderOutbound},
		{hooks.HookDispatchOutbound, broadcast, turn, false, ruleDispatchOutbound},
		{hooks.HookRegisterCLICommands, broadcast, startup, false, ruleRegisterCLICommands},
		{hooks.HookOnboardConfig, broadcast, startup, false, ruleOnboardConfig},
		{hooks.HookProvideRuntimeOptions, broadcast, turn, false, ruleRuntimeOptions},
		{hooks.HookOnError, observer, turn, true, TestBehaviour08_OnErrorObserverFailureIsIsolated},
		{hooks.HookSystemPrompt, broadcast, turn, false, TestBehaviour13_SystemPromptFragmentsJoinedInRegistrationOrder},
		{hooks.HookProvideTapeStore, first, scope, false, TestBehaviour16_TapeStoreResolvedOncePerScope},
		{hooks.HookProvideChannels, broadcast, startup, false, TestBehaviour12_ChannelsDedupedByNameHigherPriorityWins},
		{hooks.HookBuildTapeContext, first, startup, false, ruleBuildTapeContext},
		{hooks.HookAdmitMessage, first, turn, false, ruleAdmitMessage},
		{hooks.HookBeforeLLMCall, chained, turn, true, ruleBeforeLLMCall},
		{hooks.HookAfterLLMCall, observer, turn, true, ruleAfterLLMCall},
		{hooks.HookBeforeToolCall, chained, turn, true, ruleBeforeToolCall},
		{hooks.HookAfterToolCall, observer, turn, true, ruleAfterToolCall},
		{hooks.HookContinuePrompt, first, turn, false, ruleContinuePrompt},
		{hooks.HookProvideSteeringInbox, first, scope, false, ruleSteeringInbox},
	}
	specs := hooks.Specs()
	if len(specs) != len(rows) {
		t.Fatalf("Specs() has %d hooks, the table %d", len(specs), len(rows))
	}
	for i, row := range rows {
		t.Run(string(row.hook), func(t *testing.T) {
			spec := specs[i]
			order := hooks.OrderPriority
			if row.hook == hooks.HookOnboardConfig {
				order = hooks.OrderRegistration
			}
			equal(t, "spec", spec, hooks.Spec{Hook: row.hook, Kind: row.kind, Phase: row.phase, Order: order, Isolated: row.isolated})
			row.rule(t)
		})
	}
}

// resolve_session: first answer wins; no answer or "" falls back to the
// message's session id, else "<channel>:<chat_id>".
func ruleResolveSession(t *testing.T) {
	TestBehaviour06_ResolveSessionFirstResultSkipsLowerImpls(t)
	empty := &fake{name: "empty", resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "", true, nil }}
	blank := msg()
	blank.SessionID = "  "
	for _, tc := range []struct {
		name string
		r    *registry
		msg  *envelope.Envelope
		want string
	}{
		{"no implementation", newRegistry(t, nil), msg(), "telegram:42"},
		{"empty answer", newRegistry(t, nil, empty), msg(), "telegram:42"},
		{"message session id, even blank", newRegistry(t, nil, empty), blank, "  "},
		{"defaults", newRegistry(t, nil), &envelope.Envelope{}, "default:default"},
	} {
		got := must[string](t)(tc.r.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: tc.msg}))
		equal(t, tc.name, got, tc.want)
	}
}

// load_state: every result merged over the state in reverse priority
// order; nil results contribute nothing.
func ruleLoadState(t *testing.T) {
	loader := func(name string, m map[string]any) *fake {
		return &fake{name: name, loadState: func(in hooks.LoadStateInput) (map[string]any, error) {
			if in.SessionID != "s" {
				t.Errorf("load_state got session %q", in.SessionID)
			}
			return m, nil
		}}
	}
	r := newRegistry(t, nil,
		loader("builtin", map[string]any{"model": "low", "context": "c"}),
		loader("none", nil),
		loader("user", map[string]any{"model": "high"}),
	)
	state := bub.NewState(map[string]any{bub.StateWorkspace: "/w", "model": "seed"})
	if err := r.LoadState(t.Context(), hooks.LoadStateInput{Message: msg(), SessionID: "s"}, state); err != nil {
		t.Fatal(err)
	}
	equal(t, "state", state.Snapshot(), map[string]any{bub.StateWorkspace: "/w", "model": "high", "context": "c"})
}

// build_prompt: an empty selected answer falls back to the message content
// without asking lower plugins; no answer falls back too.
func ruleBuildPrompt(t *testing.T) {
	var j journal
	builder := func(name string, c llm.Content, ok bool) *fake {
		return &fake{name: name, buildPrompt: func(hooks.BuildPromptInput) (llm.Content, bool, error) {
			j.add(name)
			return c, ok, nil
		}}
	}
	parts := llm.Content{Parts: []llm.Part{{Type: "text", Text: "with parts"}}}
	in := hooks.BuildPromptInput{Message: msg(), SessionID: "s", State: bub.NewState(nil)}

	r := newRegistry(t, nil, builder("low", llm.Text("low"), true), builder("empty", llm.Content{Parts: []llm.Part{}}, true))
	equal(t, "empty answer", must[llm.Content](t)(r.BuildPrompt(t.Context(), in)), llm.Text("hello"))
	equal(t, "calls", j.get(), []string{"empty"})

	r = newRegistry(t, nil, builder("parts", parts, true), builder("quiet", llm.Content{}, false))
	equal(t, "lower answer", must[llm.Content](t)(r.BuildPrompt(t.Context(), in)), parts)

	equal(t, "no implementation", must[llm.Content](t)(newRegistry(t, nil).BuildPrompt(t.Context(), in)), llm.Text("hello"))
}

// save_state: every implementation, with the model output and the model
// stage's error; an error propagates.
func ruleSaveState(t *testing.T) {
	var j journal
	saver := func(name string, err error) *fake {
		return &fake{name: name, saveState: func(in hooks.SaveStateInput) error {
			j.add(name + ":" + in.ModelOutput + ":" + in.Err.Error())
			return err
		}}
	}
	in := hooks.SaveStateInput{SessionID: "s", State: bub.NewState(nil), Message: msg(), ModelOutput: "out", Err: errors.New("model failed")}
	r := newRegistry(t, nil, saver("low", nil), saver("high", nil))
	if err := r.SaveState(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	equal(t, "calls", j.get(), []string{"high:out:model failed", "low:out:model failed"})

	r = newRegistry(t, nil, saver("never", nil), saver("fails", errors.New("disk full")))
	var he *hooks.HookError
	if err := r.SaveState(t.Context(), in); !errors.As(err, &he) || he.Plugin != "fails" || he.Hook != hooks.HookSaveState {
		t.Fatalf("SaveState error = %v, want a HookError of plugin fails", err)
	}
}

// render_outbound: batches concatenated in priority order; an empty total
// becomes one echo envelope.
func ruleRenderOutbound(t *testing.T) {
	renderer := func(name string, contents ...string) *fake {
		return &fake{name: name, renderOutbound: func(in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
			var out []*envelope.Envelope
			for _, c := range contents {
				out = append(out, &envelope.Envelope{Content: c, SessionID: in.SessionID})
			}
			return append(out, nil), nil
		}}
	}
	in := hooks.RenderOutboundInput{Message: msg(), SessionID: "s", State: bub.NewState(nil), ModelOutput: "answer"}
	r := newRegistry(t, nil, renderer("low", "l1"), renderer("high", "h1", "h2"))
	var got []string
	for _, e := range must[[]*envelope.Envelope](t)(r.RenderOutbound(t.Context(), in)) {
		got = append(got, e.Content)
	}
	equal(t, "contents", got, []string{"h1", "h2", "l1"})

	r = newRegistry(t, nil, renderer("nothing"))
	equal(t, "echo", must[[]*envelope.Envelope](t)(r.RenderOutbound(t.Context(), in)), []*envelope.Envelope{
		{Content: "answer", SessionID: "s", Channel: "telegram", ChatID: "42", InReplyTo: "in-1"},
	})
}

// dispatch_outbound: every implementation gets the envelope.
func ruleDispatchOutbound(t *testing.T) {
	var j journal
	dispatcher := func(name string, sent bool) *fake {
		return &fake{name: name, dispatchOutbound: func(in hooks.DispatchOutboundInput) (bool, error) {
			j.add(name + ":" + in.Message.Content)
			return sent, nil
		}}
	}
	r := newRegistry(t, nil, dispatcher("router", true), dispatcher("audit", false))
	sent := must[bool](t)(r.DispatchOutbound(t.Context(), hooks.DispatchOutboundInput{Message: &envelope.Envelope{Content: "out"}}))
	equal(t, "sent", sent, true)
	equal(t, "calls", j.get(), []string{"audit:out", "router:out"})
}

type cliApp struct{ names []string }

func (a *cliApp) AddCommand(cmd hooks.CLICommand) error {
	a.names = append(a.names, cmd.Use)
	return nil
}

// register_cli_commands: startup; every implementation adds its commands.
func ruleRegisterCLICommands(t *testing.T) {
	registrar := func(name string) *fake {
		return &fake{name: name, registerCLI: func(in hooks.RegisterCLICommandsInput) error {
			return in.App.AddCommand(hooks.CLICommand{Use: name})
		}}
	}
	r := newRegistry(t, nil, registrar("run"), registrar("hooks"))
	app := &cliApp{}
	if err := r.Startup().RegisterCLICommands(t.Context(), hooks.RegisterCLICommandsInput{App: app}); err != nil {
		t.Fatal(err)
	}
	equal(t, "commands", app.names, []string{"hooks", "run"})
}

// onboard_config: registration order, each sees the merged config so far,
// recursive merge where the later fragment wins, nil skipped. (A non-map
// answer cannot be written in Go; a remote adapter must reject one.)
func ruleOnboardConfig(t *testing.T) {
	TestBehaviour18_OnboardConfigRegistrationOrderEachSeesMergedSoFar(t)
	onboarder := func(name string, fragment map[string]any) *fake {
		return &fake{name: name, onboardConfig: func(in hooks.OnboardConfigInput) (map[string]any, error) {
			in.Current["mutated"] = true // must not leak into the result
			return fragment, nil
		}}
	}
	r := newRegistry(t, nil,
		onboarder("builtin", map[string]any{"model": "a", "telegram": map[string]any{"token": "t", "proxy": "p"}}),
		onboarder("skip", nil),
		onboarder("user", map[string]any{"model": "b", "telegram": map[string]any{"token": "u"}}),
	)
	got := must[map[string]any](t)(r.Startup().OnboardConfig(t.Context(), hooks.OnboardConfigInput{Current: map[string]any{"stream_output": true}}))
	equal(t, "config", got, map[string]any{
		"stream_output": true,
		"model":         "b",
		"telegram":      map[string]any{"token": "u", "proxy": "p"},
	})
}

// provide_runtime_options: models appended in priority order; nil skipped.
func ruleRuntimeOptions(t *testing.T) {
	TestBehaviour20_RuntimeOptionsModelsInPriorityOrder(t)
	r := newRegistry(t, nil, &fake{name: "none", runtimeOptions: func(hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
		return nil, nil
	}})
	equal(t, "nil options", must[hooks.RuntimeOptions](t)(r.RuntimeOptions(t.Context(), hooks.RuntimeOptionsInput{})), hooks.RuntimeOptions{})
}

// build_tape_context: startup, first answer wins.
func ruleBuildTapeContext(t *testing.T) {
	builder := func(name string, ok bool) *fake {
		return &fake{name: name, tapeContext: func() (tapeCtx, bool, error) { return tapeCtx{anchor: name}, ok, nil }}
	}
	r := newRegistry(t, nil, builder("builtin", true), builder("custom", true), builder("quiet", false))
	c, ok, err := r.Startup().TapeContext(t.Context(), hooks.BuildTapeContextInput{})
	if err != nil || !ok {
		t.Fatalf("TapeContext = %v, %v", ok, err)
	}
	equal(t, "tape context", c, tapeCtx{anchor: "custom"})
	if _, ok, _ := newRegistry(t, nil).Startup().TapeContext(t.Context(), hooks.BuildTapeContextInput{}); ok {
		t.Error("TapeContext answered without an implementation")
	}
}

// admit_message: first answer wins; no answer means process.
func ruleAdmitMessage(t *testing.T) {
	in := hooks.AdmitMessageInput{SessionID: "s", Message: msg(), Turn: hooks.TurnSnapshot{SessionID: "s", IsRunning: true, RunningCount: 1}}
	equal(t, "no implementation", must[hooks.AdmitDecision](t)(newRegistry(t, nil).AdmitMessage(t.Context(), in)), hooks.AdmitDecision{Action: hooks.AdmitProcess})
	r := newRegistry(t, nil,
		&fake{name: "router", admitMessage: func(hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
			return hooks.AdmitDecision{Action: hooks.AdmitFollowUp}, true, nil
		}},
		&fake{name: "cli", admitMessage: func(in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
			if !in.Turn.IsRunning {
				return hooks.AdmitDecision{}, false, nil
			}
			return hooks.AdmitDecision{Action: hooks.AdmitSteer, Reason: "already generating"}, true, nil
		}},
	)
	equal(t, "decision", must[hooks.AdmitDecision](t)(r.AdmitMessage(t.Context(), in)), hooks.AdmitDecision{Action: hooks.AdmitSteer, Reason: "already generating"})
	in.Turn.IsRunning = false
	equal(t, "lower decision", must[hooks.AdmitDecision](t)(r.AdmitMessage(t.Context(), in)), hooks.AdmitDecision{Action: hooks.AdmitFollowUp})
}

// before_llm_call: chained; finish stops; failures skipped.
func ruleBeforeLLMCall(t *testing.T) {
	TestBehaviour22_BeforeLLMCallChainSeesPreviousModification(t)
	TestBehaviour30_FinishFromFirstImplStopsTheChain(t)
	TestBehaviour24_BeforeLLMCallFailureSkippedLaterChangeApplies(t)
}

// after_llm_call: every implementation once, failures skipped.
func ruleAfterLLMCall(t *testing.T) {
	var j journal
	observer := func(name string, err error) *fake {
		return &fake{name: name, afterLLM: func(in hooks.AfterLLMCallInput) error {
			j.add(name + ":" + in.Result.Text)
			return err
		}}
	}
	r := newRegistry(t, nil, observer("low", nil), observer("fails", errors.New("broken")), observer("high", nil))
	if err := r.AfterLLMCall(t.Context(), hooks.AfterLLMCallInput{Request: request(), Result: llm.Result{Text: "t"}}); err != nil {
		t.Fatal(err)
	}
	equal(t, "calls", j.get(), []string{"high:t", "fails:t", "low:t"})
}

// before_tool_call: chained; proceed with arguments folds; deny and
// replace stop.
func ruleBeforeToolCall(t *testing.T) {
	TestBehaviour25_ProceedWithArgumentsReachesLaterImplsAndHandler(t)
	TestBehaviour26_DenyStopsRemainingImpls(t)
	TestBehaviour27_ReplaceDecisionCarriesTheResult(t)
}

// after_tool_call: every implementation with the same result object.
func ruleAfterToolCall(t *testing.T) {
	TestBehaviour28_AfterToolCallReceivesTheOriginalBubError(t)
	TestBehaviour29_AfterToolCallRewritesTheResult(t)
	var seen []any
	r := newRegistry(t, nil,
		&fake{name: "low", afterTool: func(in hooks.AfterToolCallInput) error {
			seen = append(seen, in.Result.Result)
			return nil
		}},
		&fake{name: "high", afterTool: func(in hooks.AfterToolCallInput) error {
			in.Result.Result = "rewritten"
			return errors.New("fails after rewriting")
		}},
	)
	res := &tools.Result{Result: "original"}
	if err := r.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: toolCall(), Result: res}); err != nil {
		t.Fatal(err)
	}
	equal(t, "seen by the lower implementation", seen, []any{"rewritten"})
}

// continue_prompt: first answer wins; an answer is required.
func ruleContinuePrompt(t *testing.T) {
	TestBehaviour15_ContinuePromptLaterRegisteredWins(t)
	_, err := newRegistry(t, nil).ContinuePrompt(t.Context(), hooks.ContinuePromptInput{})
	if !errors.Is(err, hooks.ErrNoAnswer) || !strings.Contains(err.Error(), "continue_prompt") {
		t.Errorf("ContinuePrompt without implementations: %v, want ErrNoAnswer", err)
	}
}

type inbox struct {
	name   string
	closed int
}

func (i *inbox) Enqueue(context.Context, *envelope.Envelope, *bub.State) error { return nil }

func (i *inbox) Drain(context.Context, *bub.State) ([]*envelope.Envelope, error) { return nil, nil }

func (i *inbox) Count(context.Context, *bub.State) (int, error) { return 0, nil }

func (i *inbox) Close(context.Context) error {
	i.closed++
	return nil
}

// provide_steering_inbox: resolved once per scope, first answer wins,
// closed when the scope ends, nil outside.
func ruleSteeringInbox(t *testing.T) {
	resolved := 0
	provider := func(name string, in *inbox) *fake {
		return &fake{name: name, steeringInbox: func() (hooks.SteeringInbox, bool, error) {
			resolved++
			return in, in != nil, nil
		}}
	}
	memory := &inbox{name: "memory"}
	r := newRegistry(t, nil, provider("builtin", &inbox{name: "unused"}), provider("nats", memory), provider("quiet", nil))
	if r.SteeringInbox() != nil {
		t.Fatal("steering inbox outside a scope")
	}
	scope := must[*hooks.Scope[*memStore]](t)(r.OpenScope(t.Context()))
	if r.SteeringInbox() != memory || scope.SteeringInbox() != memory {
		t.Fatal("the scope does not hand out the highest-priority inbox")
	}
	if err := scope.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	equal(t, "resolutions", resolved, 2)
	equal(t, "closes", memory.closed, 1)
	if r.SteeringInbox() != nil {
		t.Error("steering inbox after the scope")
	}
}
