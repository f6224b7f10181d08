package agent_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// orderPlugin implements the four agent-loop hooks and records each call
// as "<hook>:<name>".
type orderPlugin struct {
	name string
	tr   *trace
}

func (p orderPlugin) Name() string { return p.name }
func (p orderPlugin) BeforeLLMCall(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	p.tr.add("before_llm_call:" + p.name)
	return nil, nil, nil
}
func (p orderPlugin) AfterLLMCall(context.Context, hooks.AfterLLMCallInput) error {
	p.tr.add("after_llm_call:" + p.name)
	return nil
}
func (p orderPlugin) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	p.tr.add("before_tool_call:" + p.name)
	return nil, nil
}
func (p orderPlugin) AfterToolCall(context.Context, hooks.AfterToolCallInput) error {
	p.tr.add("after_tool_call:" + p.name)
	return nil
}

// TestPluginsOrder: the adapter runs the hooks through the events in hook
// priority order (the last registered plugin first), each hook at its
// event.
func TestPluginsOrder(t *testing.T) {
	var tr trace
	var calls countCalls
	e := newEnv(t, toolSteps(), withTools(upperTool(&calls)),
		withPlugins(orderPlugin{"a", &tr}, orderPlugin{"b", &tr}, orderPlugin{"c", &tr}))
	e.mustRun("shout abc")
	var want []string
	for _, hook := range []string{"before_llm_call", "after_llm_call", "before_tool_call", "after_tool_call", "before_llm_call", "after_llm_call"} {
		for _, p := range []string{"c", "b", "a"} {
			want = append(want, hook+":"+p)
		}
	}
	if got := tr.get(); !slices.Equal(got, want) {
		t.Errorf("hook calls\n got %v\nwant %v", got, want)
	}
}

// TestPluginsBeforeLLMCall pins checks 22-24 and 30: before_llm_call
// implementations chain in priority order, each seeing the request as
// modified so far; a failing one is logged and skipped; a finish decision
// stops the chain and skips the provider; ErrAbort fails the run.
func TestPluginsBeforeLLMCall(t *testing.T) {
	var tr trace
	swap := beforeLLM{"swap", func(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("swap")
		req := in.Request.Clone()
		req.Model = "openai:swapped"
		return &req, nil, nil
	}}
	appendMsg := beforeLLM{"append", func(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("append saw " + in.Request.Model)
		req := in.Request.Clone()
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: llm.Text("appended")})
		return &req, nil, nil
	}}
	noop := beforeLLM{"noop", func(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("noop")
		return nil, nil, nil
	}}
	panics := beforeLLM{"panics", func(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("panics")
		panic("plugin bug")
	}}
	fails := beforeLLM{"fails", func(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("fails")
		return nil, nil, errors.New("plugin down")
	}}
	finish := beforeLLM{"finish", func(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("finish")
		return nil, llm.Finish("from the hook"), nil
	}}
	abort := beforeLLM{"abort", func(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
		tr.add("abort")
		return nil, nil, fmt.Errorf("policy service unreachable: %w", hooks.ErrAbort)
	}}

	cases := []struct {
		name string
		// plugins in registration order: the last one runs first.
		plugins   []hooks.Plugin
		wantTrace []string
		wantModel string // "" = the provider is not called
		wantUsers []string
		wantText  string
		wantErr   error
		wantLog   string
	}{
		{"swap then append (check 22)", []hooks.Plugin{appendMsg, swap}, []string{"swap", "append saw openai:swapped"}, "swapped", []string{"hi", "appended"}, "appended", nil, ""},
		{"no opinion (check 23)", []hooks.Plugin{noop}, []string{"noop"}, "fake", []string{"hi"}, "hi", nil, ""},
		{"failures skipped (check 24)", []hooks.Plugin{swap, fails, panics}, []string{"panics", "fails", "swap"}, "swapped", []string{"hi"}, "hi", nil, "hook.agent_hook_failed"},
		{"finish stops the chain (check 30)", []hooks.Plugin{swap, finish}, []string{"finish"}, "", nil, "from the hook", nil, ""},
		{"abort fails the run", []hooks.Plugin{swap, abort}, []string{"abort"}, "", nil, "", hooks.ErrAbort, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr = trace{}
			e := newEnv(t, nil, withPlugins(tc.plugins...))
			out, err := e.run("hi")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := tr.get(); !slices.Equal(got, tc.wantTrace) {
				t.Errorf("trace %v, want %v", got, tc.wantTrace)
			}
			reqs := e.requests()
			switch {
			case tc.wantModel == "" && len(reqs) != 0:
				t.Errorf("provider called %d times", len(reqs))
			case tc.wantModel != "" && len(reqs) != 1:
				t.Fatalf("%d requests", len(reqs))
			case tc.wantModel != "":
				if reqs[0].Model != tc.wantModel || !slices.Equal(userTexts(reqs[0]), tc.wantUsers) {
					t.Errorf("provider got model %q, users %q", reqs[0].Model, userTexts(reqs[0]))
				}
			}
			if tc.wantErr == nil && out.Text != tc.wantText {
				t.Errorf("output %q, want %q", out.Text, tc.wantText)
			}
			if logs := e.hookLogs.String(); tc.wantLog != "" && (!strings.Contains(logs, tc.wantLog) || !strings.Contains(logs, "plugin bug") || !strings.Contains(logs, "plugin down")) {
				t.Errorf("hook logs %q", logs)
			}
		})
	}
}

// TestPluginsToolHooks pins checks 25-29 through the adapter: proceed
// with arguments reaches later implementations and the tool; deny stops
// the chain and gives the model the deny text; replace skips the tool; a
// failing implementation is skipped; after_tool_call may rewrite the
// result; ErrAbort fails the run without running the tool.
func TestPluginsToolHooks(t *testing.T) {
	var tr trace
	safe := beforeTool{"safe", func(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
		tr.add("safe")
		args := map[string]any{"text": in.Call.Arguments["text"].(string) + " safely"}
		return tools.Proceed(args), nil
	}}
	sees := beforeTool{"sees", func(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
		tr.add("sees " + in.Call.Arguments["text"].(string))
		return nil, nil
	}}
	deny := beforeTool{"deny", func(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
		tr.add("deny")
		return tools.Deny("Refunds require approval."), nil
	}}
	replace := beforeTool{"replace", func(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
		tr.add("replace")
		return tools.Replace("cached result"), nil
	}}
	fails := beforeTool{"fails", func(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
		tr.add("fails")
		panic("plugin bug")
	}}
	abort := beforeTool{"abort", func(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
		tr.add("abort")
		return nil, fmt.Errorf("no policy: %w", hooks.ErrAbort)
	}}
	rewrite := afterTool{"rewrite", func(_ context.Context, in hooks.AfterToolCallInput) error {
		tr.add("rewrite")
		in.Result.Result = fmt.Sprintf("rewritten %v", in.Result.Result)
		return nil
	}}
	afterFails := afterTool{"after-fails", func(context.Context, hooks.AfterToolCallInput) error {
		tr.add("after-fails")
		return errors.New("observer down")
	}}

	cases := []struct {
		name      string
		plugins   []hooks.Plugin // registration order
		wantTrace []string
		wantCalls []map[string]any
		wantModel any
		wantErr   error
	}{
		{"proceed with arguments (check 25)", []hooks.Plugin{sees, safe}, []string{"safe", "sees abc safely"},
			[]map[string]any{{"text": "abc safely"}}, "ABC SAFELY", nil},
		{"deny stops the chain (check 26)", []hooks.Plugin{sees, deny}, []string{"deny"},
			nil, map[string]any{"kind": "tool", "message": "Refunds require approval."}, nil},
		{"replace skips the tool (check 27)", []hooks.Plugin{sees, replace}, []string{"replace"},
			nil, "cached result", nil},
		{"failing implementation skipped", []hooks.Plugin{safe, fails}, []string{"fails", "safe"},
			[]map[string]any{{"text": "abc safely"}}, "ABC SAFELY", nil},
		{"after_tool_call rewrites (check 29)", []hooks.Plugin{rewrite, afterFails}, []string{"after-fails", "rewrite"},
			[]map[string]any{{"text": "abc"}}, "rewritten ABC", nil},
		{"abort", []hooks.Plugin{safe, abort}, []string{"abort"}, nil, nil, hooks.ErrAbort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr = trace{}
			var calls countCalls
			e := newEnv(t, toolSteps(), withTools(upperTool(&calls)), withPlugins(tc.plugins...))
			_, err := e.run("shout abc")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := tr.get(); !slices.Equal(got, tc.wantTrace) {
				t.Errorf("trace %v, want %v", got, tc.wantTrace)
			}
			if got := calls.get(); !reflect.DeepEqual(got, tc.wantCalls) {
				t.Errorf("tool calls %v, want %v", got, tc.wantCalls)
			}
			if tc.wantErr != nil {
				if n := len(eventsOf[*events.ToolCallFinished](e.log)); n != 0 {
					t.Errorf("%d ToolCallFinished for an aborted call", n)
				}
				return
			}
			if got := toolMessages(e.requests()[1]); !reflect.DeepEqual(got, []any{tc.wantModel}) {
				t.Errorf("model saw %#v, want %#v", got, tc.wantModel)
			}
		})
	}
}

// TestPluginsKeepEarlierProceed: a proceed decision with arguments set by
// a handler registered before the adapter is not lost: the hooks see its
// arguments and the tool runs with them.
func TestPluginsKeepEarlierProceed(t *testing.T) {
	var calls countCalls
	var seen any
	observe := beforeTool{"observe", func(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
		seen = in.Call.Arguments["text"]
		return nil, nil
	}}
	e := newEnv(t, toolSteps(), withTools(upperTool(&calls)), withPlugins(observe),
		withEarlyHandler(func(b *events.Bus) {
			events.On(b, func(_ context.Context, ev *events.ToolCallStarted) error {
				ev.Decision = tools.Proceed(map[string]any{"text": "early"})
				return nil
			})
		}))
	e.mustRun("shout abc")
	if seen != "early" {
		t.Errorf("before_tool_call saw %v", seen)
	}
	if got := calls.get(); !reflect.DeepEqual(got, []map[string]any{{"text": "early"}}) {
		t.Errorf("tool calls %v", got)
	}
}

// TestPluginsSteering: the steering inbox is drained into MessagesPending:
// at step start its messages go before the prompt and are recorded; at
// step end they make the run continue.
func TestPluginsSteering(t *testing.T) {
	t.Run("start", func(t *testing.T) {
		steer := &steerQueue{batches: [][]llm.Content{{llm.Text("steer 1"), llm.Text("steer 2")}}}
		e := newEnv(t, []fakellm.Step{{Text: "ok"}}, withSteering(steer))
		out := e.mustRun("the prompt")
		if got := userTexts(e.requests()[0]); !slices.Equal(got, []string{"steer 1", "steer 2", "the prompt"}) {
			t.Errorf("user messages %q", got)
		}
		if out.Steps != 1 || steer.drains != 2 {
			t.Errorf("%d steps, %d drains", out.Steps, steer.drains)
		}
		var recorded []string
		for _, en := range e.tape.entries(t) {
			if en.Kind == tape.KindMessage && en.Payload["role"] == llm.RoleUser {
				recorded = append(recorded, en.Payload["content"].(string))
			}
		}
		if !slices.Equal(recorded, []string{"steer 1", "steer 2", "the prompt"}) {
			t.Errorf("recorded user messages %q", recorded)
		}
	})
	t.Run("end", func(t *testing.T) {
		steer := &steerQueue{batches: [][]llm.Content{nil, {llm.Text("late news")}}}
		e := newEnv(t, []fakellm.Step{{Text: "first"}, {Text: "second"}}, withSteering(steer))
		out := e.mustRun("the prompt")
		if out.Steps != 2 || out.Text != "firstsecond" {
			t.Errorf("output %+v", out)
		}
		want := []string{"the prompt", "late news", agent.DefaultContinuePrompt}
		if got := userTexts(e.requests()[1]); !slices.Equal(got, want) {
			t.Errorf("second request users\n got %q\nwant %q", got, want)
		}
	})
}

// TestPluginsOff: the function Plugins returns removes every handler.
func TestPluginsOff(t *testing.T) {
	var tr trace
	reg := hooks.New[tape.Store, tape.Context]()
	reg.MustRegister(orderPlugin{"p", &tr})
	e := newEnv(t, []fakellm.Step{{Text: "ok"}})
	bus := &events.Bus{}
	off := agent.Plugins(bus, reg, &steerQueue{})
	off()
	if _, err := e.agent().Run(context.Background(), e.newRun("hi", func(r *agent.Run) { r.Bus = bus })); err != nil {
		t.Fatal(err)
	}
	if got := tr.get(); len(got) != 0 {
		t.Errorf("hooks ran after off: %v", got)
	}
}
