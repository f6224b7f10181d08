package hookstest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// Run runs the agent-loop hook conformance suite. wrap receives every
// plugin the suite builds and returns the plugin to register in its place
// (return p itself to test the registry alone); it may register cleanups
// on t. Every case runs in three modes: "as_given" (nothing wrapped),
// "wrapped" (every plugin wrapped) and "interleaved" (every second plugin
// wrapped, so wrapped and unwrapped plugins share one chain).
//
// What a wrapper must carry: the hook inputs (request, call, a public
// state snapshot, the result object), every decision (no opinion, modified
// request, proceed with arguments, replace, deny, finish), a rewritten tool
// result, the kind and message of a *bub.Error, failures and panics (as
// errors), and exactly the hooks the wrapped plugin implements.
func Run(t *testing.T, wrap func(t *testing.T, p hooks.Plugin) hooks.Plugin) {
	t.Helper()
	modes := []struct {
		name    string
		wrapped func(i int) bool
	}{
		{"as_given", func(int) bool { return false }},
		{"wrapped", func(int) bool { return true }},
		{"interleaved", func(i int) bool { return i%2 == 1 }},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range cases() {
				t.Run(c.name, func(t *testing.T) {
					h := &harness{t: t, wrap: wrap, wrapped: m.wrapped, j: &journal{}}
					h.reg = hooks.New[struct{}, struct{}](hooks.WithDecisionObserver(h.observe))
					c.run(t, h)
				})
			}
		})
	}
}

// harness is one case's registry, journal and decision records.
type harness struct {
	t       *testing.T
	reg     *hooks.Registry[struct{}, struct{}]
	wrap    func(t *testing.T, p hooks.Plugin) hooks.Plugin
	wrapped func(i int) bool
	j       *journal
	n       int // plugins registered so far

	mu      sync.Mutex
	records []hooks.DecisionRecord
}

func (h *harness) observe(_ context.Context, r hooks.DecisionRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
}

// register registers ps in order (the last has the highest priority),
// wrapping them as the mode says, and returns the registered names.
func (h *harness) register(ps ...hooks.Plugin) []string {
	h.t.Helper()
	names := make([]string, len(ps))
	for i, p := range ps {
		if h.wrapped(h.n) {
			p = h.wrap(h.t, p)
		}
		h.n++
		if err := h.reg.Register(p); err != nil {
			h.t.Fatalf("registering %q: %v", p.Name(), err)
		}
		names[i] = p.Name()
	}
	return names
}

// verdicts returns the decision records as "plugin:verdict" strings.
func (h *harness) verdicts(hook hooks.Hook) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Hook != hook {
			h.t.Errorf("decision record of %s, want %s", r.Hook, hook)
		}
		if r.Duration < 0 {
			h.t.Errorf("decision record of %s has a negative duration", r.Plugin)
		}
		out = append(out, r.Plugin+":"+string(r.Verdict))
	}
	return out
}

func (h *harness) beforeLLM(name string, fn func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error)) hooks.Plugin {
	return &beforeLLM{name: name, j: h.j, fn: fn}
}

func (h *harness) afterLLM(name string, fn func(hooks.AfterLLMCallInput) error) hooks.Plugin {
	return &afterLLM{name: name, j: h.j, fn: fn}
}

func (h *harness) beforeTool(name string, fn func(hooks.BeforeToolCallInput) (*tools.Decision, error)) hooks.Plugin {
	return &beforeTool{name: name, j: h.j, fn: fn}
}

func (h *harness) afterTool(name string, fn func(hooks.AfterToolCallInput) error) hooks.Plugin {
	return &afterTool{name: name, j: h.j, fn: fn}
}

// The inputs of every case. Values are strings and bools so that they
// survive a JSON hop unchanged.

func newState() *bub.State {
	return bub.NewState(map[string]any{bub.StateSessionID: "hookstest", "mode": "readonly"})
}

func request() llm.Request {
	return llm.Request{
		RunID:     "run-1",
		Model:     "openai:gpt-4o",
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hello")}},
		ToolNames: []string{"fs_read"},
		MaxTokens: 64,
	}
}

func call() tools.Call {
	return tools.Call{RunID: "run-1", Tool: "fs_read", Arguments: map[string]any{"path": "a.txt"}, CallID: "call-1"}
}

func swapModel(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	r := in.Request.Clone()
	r.Model = "openai:gpt-4o-mini"
	r.MaxTokens = 32
	return &r, nil, nil
}

func fail() error { return errors.New("plugin failed") }

// equal reports a mismatch of got and want.
func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func noError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
}

// suiteCase is one behaviour of the suite.
type suiteCase struct {
	name string
	run  func(t *testing.T, h *harness)
}

// cases returns the suite's behaviours.
func cases() []suiteCase {
	return []suiteCase{
		{"before_llm_call/modify", func(t *testing.T, h *harness) {
			names := h.register(h.beforeLLM("swap", swapModel))
			got, dec, err := h.reg.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request(), State: newState()})
			noError(t, err)
			want := request()
			want.Model, want.MaxTokens = "openai:gpt-4o-mini", 32
			equal(t, "request", got, want)
			equal(t, "decision", dec, (*llm.Decision)(nil))
			equal(t, "decisions", h.verdicts(hooks.HookBeforeLLMCall), []string{names[0] + ":modify"})
		}},
		{"before_llm_call/chain_sees_previous_change", func(t *testing.T, h *harness) {
			h.register(
				h.beforeLLM("append", func(in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
					h.j.see("model", in.Request.Model)
					r := in.Request.Clone()
					r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: llm.Text("appended")})
					return &r, nil, nil
				}),
				h.beforeLLM("swap", swapModel),
			)
			got, _, err := h.reg.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request(), State: newState()})
			noError(t, err)
			equal(t, "calls", h.j.get(), []string{"swap", "append"})
			equal(t, "model seen by the second implementation", h.j.saw("model"), any("openai:gpt-4o-mini"))
			equal(t, "model", got.Model, "openai:gpt-4o-mini")
			equal(t, "messages", len(got.Messages), 2)
		}},
		{"before_llm_call/no_opinion", func(t *testing.T, h *harness) {
			h.register(h.beforeLLM("quiet", func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
				return nil, nil, nil
			}))
			got, dec, err := h.reg.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request(), State: newState()})
			noError(t, err)
			equal(t, "request", got, request())
			equal(t, "decision", dec, (*llm.Decision)(nil))
			equal(t, "decisions", h.verdicts(hooks.HookBeforeLLMCall), []string(nil))
		}},
		{"before_llm_call/finish_stops_the_chain", func(t *testing.T, h *harness) {
			names := h.register(
				h.beforeLLM("later", swapModel),
				h.beforeLLM("finisher", func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
					return nil, llm.Finish("done"), nil
				}),
			)
			got, dec, err := h.reg.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request(), State: newState()})
			noError(t, err)
			if dec == nil || dec.Text != "done" {
				t.Fatalf("decision = %#v, want finish %q", dec, "done")
			}
			equal(t, "request", got, request())
			equal(t, "calls", h.j.get(), []string{"finisher"})
			equal(t, "decisions", h.verdicts(hooks.HookBeforeLLMCall), []string{names[1] + ":finish"})
		}},
		{"before_llm_call/failures_are_skipped", func(t *testing.T, h *harness) {
			names := h.register(
				h.beforeLLM("applies", swapModel),
				h.beforeLLM("panics", func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
					panic("policy bug")
				}),
				h.beforeLLM("fails", func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
					return nil, nil, fail()
				}),
			)
			got, dec, err := h.reg.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: request(), State: newState()})
			noError(t, err)
			equal(t, "calls", h.j.get(), []string{"fails", "panics", "applies"})
			equal(t, "model", got.Model, "openai:gpt-4o-mini")
			equal(t, "decision", dec, (*llm.Decision)(nil))
			equal(t, "decisions", h.verdicts(hooks.HookBeforeLLMCall),
				[]string{names[2] + ":failed", names[1] + ":failed", names[0] + ":modify"})
		}},
		{"before_tool_call/proceed_with_arguments", func(t *testing.T, h *harness) {
			names := h.register(
				h.beforeTool("sees", func(in hooks.BeforeToolCallInput) (*tools.Decision, error) {
					h.j.see("arguments", in.Call.Arguments)
					return nil, nil
				}),
				h.beforeTool("safe", func(in hooks.BeforeToolCallInput) (*tools.Decision, error) {
					return tools.Proceed(map[string]any{"path": in.Call.Arguments["path"], "safe": true}), nil
				}),
			)
			in := call()
			got, dec, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: in, State: newState()})
			noError(t, err)
			want := map[string]any{"path": "a.txt", "safe": true}
			equal(t, "arguments", got.Arguments, want)
			equal(t, "arguments seen by the next implementation", h.j.saw("arguments"), any(want))
			equal(t, "caller's arguments", in.Arguments, call().Arguments)
			equal(t, "decision", dec, (*tools.Decision)(nil))
			equal(t, "decisions", h.verdicts(hooks.HookBeforeToolCall), []string{names[1] + ":modify"})
		}},
		{"before_tool_call/deny_stops_the_chain", func(t *testing.T, h *harness) {
			names := h.register(
				h.beforeTool("never", func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, nil }),
				h.beforeTool("deny", func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
					return tools.Deny("writes are not allowed"), nil
				}),
			)
			_, dec, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: call(), State: newState()})
			noError(t, err)
			equal(t, "decision", dec, tools.Deny("writes are not allowed"))
			equal(t, "calls", h.j.get(), []string{"deny"})
			equal(t, "decisions", h.verdicts(hooks.HookBeforeToolCall), []string{names[1] + ":deny"})
		}},
		{"before_tool_call/replace_stops_the_chain", func(t *testing.T, h *harness) {
			names := h.register(
				h.beforeTool("never", func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, nil }),
				h.beforeTool("cache", func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
					return tools.Replace("cached result"), nil
				}),
			)
			_, dec, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: call(), State: newState()})
			noError(t, err)
			equal(t, "decision", dec, tools.Replace("cached result"))
			equal(t, "calls", h.j.get(), []string{"cache"})
			equal(t, "decisions", h.verdicts(hooks.HookBeforeToolCall), []string{names[1] + ":replace"})
		}},
		{"before_tool_call/sees_state", func(t *testing.T, h *harness) {
			h.register(h.beforeTool("readonly", func(in hooks.BeforeToolCallInput) (*tools.Decision, error) {
				if in.State.String("mode") == "readonly" && in.Call.Tool == "fs_read" {
					return tools.Deny("read-only session"), nil
				}
				return nil, nil
			}))
			_, dec, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: call(), State: newState()})
			noError(t, err)
			equal(t, "decision", dec, tools.Deny("read-only session"))
		}},
		{"before_tool_call/no_opinion", func(t *testing.T, h *harness) {
			h.register(
				h.beforeTool("nil", func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, nil }),
				h.beforeTool("proceed", func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return tools.Proceed(nil), nil }),
			)
			got, dec, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: call(), State: newState()})
			noError(t, err)
			equal(t, "call", got, call())
			equal(t, "decision", dec, (*tools.Decision)(nil))
			equal(t, "calls", h.j.get(), []string{"proceed", "nil"})
			equal(t, "decisions", h.verdicts(hooks.HookBeforeToolCall), []string(nil))
		}},
		{"before_tool_call/failures_are_skipped", func(t *testing.T, h *harness) {
			names := h.register(
				h.beforeTool("replace", func(hooks.BeforeToolCallInput) (*tools.Decision, error) {
					return tools.Replace("fallback"), nil
				}),
				h.beforeTool("panics", func(hooks.BeforeToolCallInput) (*tools.Decision, error) { panic("policy bug") }),
				h.beforeTool("fails", func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, fail() }),
			)
			_, dec, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: call(), State: newState()})
			noError(t, err)
			equal(t, "decision", dec, tools.Replace("fallback"))
			equal(t, "calls", h.j.get(), []string{"fails", "panics", "replace"})
			equal(t, "decisions", h.verdicts(hooks.HookBeforeToolCall),
				[]string{names[2] + ":failed", names[1] + ":failed", names[0] + ":replace"})
		}},
		{"after_llm_call/every_implementation_once", func(t *testing.T, h *harness) {
			seen := func(name string) func(hooks.AfterLLMCallInput) error {
				return func(in hooks.AfterLLMCallInput) error {
					h.j.see(name, in.Request.Model+"|"+in.Result.Text+"|"+in.Result.RunID)
					return nil
				}
			}
			h.register(
				h.afterLLM("low", seen("low")),
				h.afterLLM("panics", func(hooks.AfterLLMCallInput) error { panic("observer bug") }),
				h.afterLLM("fails", func(hooks.AfterLLMCallInput) error { return fail() }),
				h.afterLLM("high", seen("high")),
			)
			err := h.reg.AfterLLMCall(t.Context(), hooks.AfterLLMCallInput{
				Request: request(),
				Result:  llm.Result{RunID: "run-1", Text: "answer", DurationMS: 5},
				State:   newState(),
			})
			noError(t, err)
			equal(t, "calls", h.j.get(), []string{"high", "fails", "panics", "low"})
			for _, n := range []string{"low", "high"} {
				equal(t, n+" saw", h.j.saw(n), any("openai:gpt-4o|answer|run-1"))
			}
		}},
		{"after_llm_call/sees_the_error", func(t *testing.T, h *harness) {
			h.register(h.afterLLM("errors", func(in hooks.AfterLLMCallInput) error {
				if in.Result.Err != nil {
					h.j.see("err", in.Result.Err.Error())
				}
				return nil
			}))
			err := h.reg.AfterLLMCall(t.Context(), hooks.AfterLLMCallInput{
				Request: request(),
				Result:  llm.Result{RunID: "run-1", Err: errors.New("provider down")},
				State:   newState(),
			})
			noError(t, err)
			if got, _ := h.j.saw("err").(string); !strings.Contains(got, "provider down") {
				t.Errorf("after_llm_call saw error %q, want it to mention %q", got, "provider down")
			}
		}},
		{"after_tool_call/result_is_shared", func(t *testing.T, h *harness) {
			h.register(
				h.afterTool("low", func(in hooks.AfterToolCallInput) error {
					h.j.see("result", in.Result.Result)
					return nil
				}),
				h.afterTool("fails", func(hooks.AfterToolCallInput) error { return fail() }),
				h.afterTool("rewriter", func(in hooks.AfterToolCallInput) error {
					in.Result.Result = "rewritten"
					return nil
				}),
			)
			res := &tools.Result{RunID: "run-1", Tool: "fs_read", Arguments: call().Arguments, Result: "original"}
			noError(t, h.reg.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: call(), Result: res, State: newState()}))
			equal(t, "calls", h.j.get(), []string{"rewriter", "fails", "low"})
			equal(t, "result seen by a later implementation", h.j.saw("result"), any("rewritten"))
			equal(t, "result returned to the caller", res.Result, any("rewritten"))
		}},
		{"after_tool_call/error_keeps_its_kind", func(t *testing.T, h *harness) {
			h.register(h.afterTool("errors", func(in hooks.AfterToolCallInput) error {
				var be *bub.Error
				switch {
				case in.Result.Err == nil:
					h.j.see(in.Call.CallID, "no error")
				case errors.As(in.Result.Err, &be):
					h.j.see(in.Call.CallID, fmt.Sprintf("%s|%s", be.Kind, be.Message))
				default:
					h.j.see(in.Call.CallID, "untyped: "+in.Result.Err.Error())
				}
				return nil
			}))
			failed := call()
			failed.CallID = "failed"
			res := &tools.Result{RunID: "run-1", Tool: "fs_read", Err: bub.Errorf(bub.KindTool, "Tool 'fs_read' execution failed.")}
			noError(t, h.reg.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: failed, Result: res, State: newState()}))
			ok := call()
			ok.CallID = "ok"
			res = &tools.Result{RunID: "run-1", Tool: "fs_read", Result: "text"}
			noError(t, h.reg.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: ok, Result: res, State: newState()}))
			equal(t, "failed call", h.j.saw("failed"), any("tool|Tool 'fs_read' execution failed."))
			equal(t, "successful call", h.j.saw("ok"), any("no error"))
		}},
		{"exposes_exactly_the_plugins_hooks", func(t *testing.T, h *harness) {
			j := h.j
			names := h.register(
				&policy{
					beforeTool: beforeTool{name: "policy", j: j, fn: func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, nil }},
					after:      func(hooks.AfterToolCallInput) error { return nil },
				},
				h.beforeLLM("model", func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) { return nil, nil, nil }),
			)
			want := map[string][]hooks.Hook{
				names[0]: {hooks.HookAfterToolCall, hooks.HookBeforeToolCall},
				names[1]: {hooks.HookBeforeLLMCall},
			}
			got := map[string][]hooks.Hook{}
			for _, hr := range h.reg.Report() {
				for _, im := range hr.Impls {
					got[im.Plugin] = append(got[im.Plugin], hr.Hook)
				}
			}
			for _, hs := range got {
				slices.Sort(hs)
			}
			equal(t, "hooks per plugin", got, want)

			_, _, err := h.reg.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: call(), State: newState()})
			noError(t, err)
			res := &tools.Result{RunID: "run-1", Tool: "fs_read", Result: "text"}
			noError(t, h.reg.AfterToolCall(t.Context(), hooks.AfterToolCallInput{Call: call(), Result: res, State: newState()}))
			equal(t, "calls", j.get(), []string{"policy", "policy.after"})
		}},
	}
}
