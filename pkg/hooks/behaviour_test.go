package hooks_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// Behaviour checks of Python Bub that concern hook dispatch, one test
// each, named after the check's number in the behaviour catalogue the port
// was written against (not part of this repository; docs/hooks.md states
// the rules).

// Check 6. (Extra keyword arguments are moot in Go: inputs are structs.)
func TestBehaviour06_ResolveSessionFirstResultSkipsLowerImpls(t *testing.T) {
	var j journal
	resolver := func(name, answer string) *fake {
		return &fake{name: name, resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) {
			j.add(name)
			return answer, answer != "", nil
		}}
	}
	r := newRegistry(t, nil, resolver("low", "low"), resolver("mid", "mid"), resolver("high", ""))
	got := must[string](t)(r.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: msg()}))
	equal(t, "session", got, "mid")
	equal(t, "calls", j.get(), []string{"high", "mid"})
}

// Check 8.
func TestBehaviour08_OnErrorObserverFailureIsIsolated(t *testing.T) {
	var j journal
	observer := func(name string, fn func() error) *fake {
		return &fake{name: name, onError: func(in hooks.OnErrorInput) error {
			j.add(name + ":" + in.Stage + ":" + in.Err.Error())
			return fn()
		}}
	}
	opts, logs := logBuffer()
	r := newRegistry(t, opts,
		observer("first", func() error { return nil }),
		observer("raises", func() error { return errors.New("observer broke") }),
		observer("panics", func() error { panic("observer bug") }),
	)
	r.NotifyError(t.Context(), hooks.OnErrorInput{Stage: "turn", Err: errors.New("original"), Message: msg()})
	equal(t, "calls", j.get(), []string{"panics:turn:original", "raises:turn:original", "first:turn:original"})
	for _, want := range []string{
		"msg=hook.on_error_failed stage=turn adapter=raises",
		"msg=hook.on_error_failed stage=turn adapter=panics",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// Check 9.
func TestBehaviour09_StreamOnlyModelServesNonStreamingCalls(t *testing.T) {
	r := newRegistry(t, nil, &fake{name: "stream", runModelStream: func(hooks.RunModelInput) (hooks.Stream, bool, error) {
		return func(yield func(llm.Delta, error) bool) {
			_ = yield(llm.Delta{Kind: "reasoning", Text: "thinking"}, nil) &&
				yield(llm.Delta{Kind: "text", Text: "stre"}, nil) &&
				yield(llm.Delta{Kind: "text", Text: "amed"}, nil)
		}, true, nil
	}})
	out, ok, err := r.RunModel(t.Context(), hooks.RunModelInput{Prompt: llm.Text("hi"), SessionID: "s"})
	if err != nil || !ok {
		t.Fatalf("RunModel = %q, %v, %v", out, ok, err)
	}
	equal(t, "output", out, "streamed")
}

// Check 10.
func TestBehaviour10_TextOnlyModelServesStreamingCalls(t *testing.T) {
	r := newRegistry(t, nil, &fake{name: "text", runModel: func(hooks.RunModelInput) (string, bool, error) {
		return "plain", true, nil
	}})
	s, ok, err := r.RunModelStream(t.Context(), hooks.RunModelInput{Prompt: llm.Text("hi")})
	if err != nil || !ok {
		t.Fatalf("RunModelStream = %v, %v", ok, err)
	}
	var got []llm.Delta
	for d, err := range s {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	equal(t, "deltas", got, []llm.Delta{{Kind: "text", Text: "plain"}})
}

type channel struct{ name, owner string }

func (c channel) Name() string { return c.name }

// Check 12.
func TestBehaviour12_ChannelsDedupedByNameHigherPriorityWins(t *testing.T) {
	provider := func(owner string, names ...string) *fake {
		return &fake{name: owner, channels: func(hooks.ProvideChannelsInput) ([]hooks.Channel, error) {
			var out []hooks.Channel
			for _, n := range names {
				out = append(out, channel{n, owner})
			}
			return out, nil
		}}
	}
	r := newRegistry(t, nil, provider("early", "shared", "one"), provider("late", "shared", "two"))
	got := must[[]hooks.Channel](t)(r.Startup().Channels(t.Context(), hooks.ProvideChannelsInput{}))
	equal(t, "channels", got, []hooks.Channel{channel{"shared", "late"}, channel{"two", "late"}, channel{"one", "early"}})
}

// Check 13.
func TestBehaviour13_SystemPromptFragmentsJoinedInRegistrationOrder(t *testing.T) {
	fragment := func(name, text string) *fake {
		return &fake{name: name, systemPrompt: func(hooks.SystemPromptInput) (string, error) { return text, nil }}
	}
	r := newRegistry(t, nil, fragment("low", "low"), fragment("high", "high"), fragment("empty", ""))
	got := must[string](t)(r.SystemPrompt(t.Context(), hooks.SystemPromptInput{Prompt: "p", State: bub.NewState(nil)}))
	equal(t, "system prompt", got, "low\n\nhigh")
}

// Check 15 is about a sync and an async implementation of continue_prompt;
// Go has no such split. Its Go counterpart: the later-registered
// implementation answers and the earlier one is not asked.
func TestBehaviour15_ContinuePromptLaterRegisteredWins(t *testing.T) {
	var j journal
	continuer := func(name string) *fake {
		return &fake{name: name, continuePrompt: func(in hooks.ContinuePromptInput) (string, bool, error) {
			j.add(name)
			return name + ": " + in.Prompt.PlainText(), true, nil
		}}
	}
	r := newRegistry(t, nil, continuer("sync"), continuer("async"))
	got := must[string](t)(r.ContinuePrompt(t.Context(), hooks.ContinuePromptInput{Prompt: llm.Text("go on"), Step: 1}))
	equal(t, "prompt", got, "async: go on")
	equal(t, "calls", j.get(), []string{"async"})
}

// Check 16.
func TestBehaviour16_TapeStoreResolvedOncePerScope(t *testing.T) {
	store := &memStore{name: "file"}
	resolved := 0
	r := newRegistry(t, nil, &fake{name: "builtin", tapeStore: func() (*memStore, bool, error) {
		resolved++
		return store, true, nil
	}})
	if got := r.TapeStore(); got != nil {
		t.Fatalf("tape store outside a scope = %v, want nil", got)
	}
	scope := must[*hooks.Scope[*memStore]](t)(r.OpenScope(t.Context()))
	for range 3 {
		if r.TapeStore() != store || scope.TapeStore() != store {
			t.Fatal("the scope does not return its store")
		}
	}
	equal(t, "resolutions", resolved, 1)
	equal(t, "closes inside the scope", store.closed, 0)
	if err := scope.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	equal(t, "closes", store.closed, 1)
	if r.TapeStore() != nil || scope.TapeStore() != nil {
		t.Error("tape store after the scope is not nil")
	}
}

// Check 18.
func TestBehaviour18_OnboardConfigRegistrationOrderEachSeesMergedSoFar(t *testing.T) {
	var seen []map[string]any
	onboarder := func(name string, fragment map[string]any) *fake {
		return &fake{name: name, onboardConfig: func(in hooks.OnboardConfigInput) (map[string]any, error) {
			seen = append(seen, in.Current)
			return fragment, nil
		}}
	}
	r := newRegistry(t, nil,
		onboarder("first", map[string]any{"model": "openrouter:free"}),
		onboarder("second", map[string]any{"telegram": map[string]any{"token": "t"}}),
	)
	got := must[map[string]any](t)(r.Startup().OnboardConfig(t.Context(), hooks.OnboardConfigInput{}))
	equal(t, "seen", seen, []map[string]any{{}, {"model": "openrouter:free"}})
	equal(t, "config", got, map[string]any{"model": "openrouter:free", "telegram": map[string]any{"token": "t"}})
}

// Check 20.
func TestBehaviour20_RuntimeOptionsModelsInPriorityOrder(t *testing.T) {
	provider := func(name string, models ...string) *fake {
		return &fake{name: name, runtimeOptions: func(hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
			o := &hooks.RuntimeOptions{Current: models[0]}
			for _, m := range models {
				o.Models = append(o.Models, hooks.ModelChoice{ID: m, Name: m})
			}
			return o, nil
		}}
	}
	r := newRegistry(t, nil, provider("low", "low"), provider("high", "high", "mid"))
	got := must[hooks.RuntimeOptions](t)(r.RuntimeOptions(t.Context(), hooks.RuntimeOptionsInput{SessionID: "s"}))
	var ids []string
	for _, m := range got.Models {
		ids = append(ids, m.ID)
	}
	equal(t, "models", ids, []string{"high", "mid", "low"})
	equal(t, "current", got.Current, "high")
}

func request() llm.Request {
	return llm.Request{RunID: "run-1", Model: "openai:gpt-4o", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}}}
}

func toolCall() tools.Call {
	return tools.Call{RunID: "run-1", Tool: "fs_write", Arguments: map[string]any{"path": "a.txt"}}
}

// Check 22.
func TestBehaviour22_BeforeLLMCallChainSeesPreviousModification(t *testing.T) {
	var sawModel string
	r := newRegistry(t, nil,
		&fake{name: "append", beforeLLM: func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			sawModel = in.Request.Model
			req := in.Request.Clone()
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: llm.Text("appended")})
			return &req, nil, nil
		}},
		&fake{name: "swap", beforeLLM: func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			req := in.Request.Clone()
			req.Model = "openai:gpt-4o-mini"
			return &req, nil, nil
		}},
	)
	got, dec, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request()})
	if err != nil || dec != nil {
		t.Fatalf("BeforeLLMCall: decision %v, error %v", dec, err)
	}
	equal(t, "model seen by append", sawModel, "openai:gpt-4o-mini")
	equal(t, "model", got.Model, "openai:gpt-4o-mini")
	equal(t, "messages", len(got.Messages), 2)
}

// Check 23. (Python's "returns a string" case cannot be written in Go.)
func TestBehaviour23_BeforeLLMCallNoOpinionLeavesRequestUnchanged(t *testing.T) {
	r := newRegistry(t, nil, &fake{name: "quiet", beforeLLM: func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		return nil, nil, nil
	}})
	got, dec, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request()})
	if err != nil || dec != nil {
		t.Fatalf("BeforeLLMCall: decision %v, error %v", dec, err)
	}
	equal(t, "request", got, request())
}

// Check 24.
func TestBehaviour24_BeforeLLMCallFailureSkippedLaterChangeApplies(t *testing.T) {
	opts, logs := logBuffer()
	r := newRegistry(t, opts,
		&fake{name: "swap", beforeLLM: func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			req := in.Request.Clone()
			req.Model = "openai:gpt-4o-mini"
			return &req, nil, nil
		}},
		&fake{name: "raises", beforeLLM: func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			return nil, nil, errors.New("policy broke")
		}},
	)
	got, _, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request()})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "model", got.Model, "openai:gpt-4o-mini")
	if want := "msg=hook.agent_hook_failed hook=before_llm_call adapter=raises"; !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs)
	}
}

// Check 25.
func TestBehaviour25_ProceedWithArgumentsReachesLaterImplsAndHandler(t *testing.T) {
	var seen map[string]any
	r := newRegistry(t, nil,
		&fake{name: "later", beforeTool: func(in hooks.BeforeToolCallInput) (*tools.Decision, error) {
			seen = in.Call.Arguments
			return nil, nil
		}},
		&fake{name: "safe", beforeTool: func(in hooks.BeforeToolCallInput) (*tools.Decision, error) {
			return tools.Proceed(map[string]any{"path": in.Call.Arguments["path"], "safe": true}), nil
		}},
	)
	call, dec, err := r.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: toolCall()})
	if err != nil || dec != nil {
		t.Fatalf("BeforeToolCall: decision %v, error %v", dec, err)
	}
	want := map[string]any{"path": "a.txt", "safe": true}
	equal(t, "arguments seen by the later impl", seen, want)
	equal(t, "arguments for the handler", call.Arguments, want)
}

// Check 26. (Turning the deny into an error result is the executor's job.)
func TestBehaviour26_DenyStopsRemainingImpls(t *testing.T) {
	var j journal
	r := newRegistry(t, nil,
		&fake{name: "remaining", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			j.add("remaining")
			return nil, nil
		}},
		&fake{name: "deny", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
			return tools.Deny("blocked by policy"), nil
		}},
	)
	_, dec, err := r.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: toolCall()})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "decision", dec, tools.Deny("blocked by policy"))
	equal(t, "remaining calls", j.get(), []string(nil))
}

// Check 27. (Skipping the handler is the executor's job; it gets the
// replace decision.)
func TestBehaviour27_ReplaceDecisionCarriesTheResult(t *testing.T) {
	r := newRegistry(t, nil, &fake{name: "cache", beforeTool: func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
		return tools.Replace("cached result"), nil
	}})
	_, dec, err := r.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: toolCall()})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "decision", dec, tools.Replace("cached result"))
}

// Check 28.
func TestBehaviour28_AfterToolCallReceivesTheOriginalBubError(t *testing.T) {
	var got []error
	r := newRegistry(t, nil, &fake{name: "observer", afterTool: func(in hooks.AfterToolCallInput) error {
		got = append(got, in.Result.Err)
		return nil
	}})
	toolErr := &bub.Error{Kind: bub.KindTool, Message: "Tool 'fs_write' execution failed.", Details: map[string]any{"error": "disk full"}}
	for _, res := range []*tools.Result{{Tool: "fs_write", Err: toolErr}, {Tool: "fs_write", Result: "ok"}} {
		if err := r.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: toolCall(), Result: res}); err != nil {
			t.Fatal(err)
		}
	}
	var be *bub.Error
	if len(got) != 2 || !errors.As(got[0], &be) || be != toolErr || be.Kind != bub.KindTool {
		t.Fatalf("failed call: after_tool_call saw %v, want the original *bub.Error", got)
	}
	equal(t, "successful call error", got[1], nil)
}

// Check 29.
func TestBehaviour29_AfterToolCallRewritesTheResult(t *testing.T) {
	r := newRegistry(t, nil, &fake{name: "rewriter", afterTool: func(in hooks.AfterToolCallInput) error {
		in.Result.Result = "rewritten"
		return nil
	}})
	res := &tools.Result{Tool: "fs_read", Result: "original"}
	if err := r.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: toolCall(), Result: res}); err != nil {
		t.Fatal(err)
	}
	equal(t, "result", res.Result, any("rewritten"))
}

// Check 30.
func TestBehaviour30_FinishFromFirstImplStopsTheChain(t *testing.T) {
	var j journal
	r := newRegistry(t, nil,
		&fake{name: "later", beforeLLM: func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			j.add("later")
			return nil, nil, nil
		}},
		&fake{name: "first", beforeLLM: func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
			return nil, llm.Finish("cached answer"), nil
		}},
	)
	_, dec, err := r.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request()})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "decision", dec, llm.Finish("cached answer"))
	if slices.Contains(j.get(), "later") {
		t.Error("a later before_llm_call ran after finish")
	}
}
