package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/openai"
	"github.com/bubbus/bub/pkg/llm/providers"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// TestToolCallsRunConcurrently: the tool calls of one response run at the
// same time — each tool waits until both have started, which would time
// out if they ran one after the other — and the results reach the model in
// call order although the first call finishes last.
func TestToolCallsRunConcurrently(t *testing.T) {
	var started sync.WaitGroup
	started.Add(2)
	bothStarted := make(chan struct{})
	go func() { started.Wait(); close(bothStarted) }()
	var e *env
	// secondFinished reports whether the second call's ToolCallFinished
	// is on the log: the first call returns only after it, so the order
	// checked below is the order the calls finished in, not a race
	// between the second's return and its event.
	secondFinished := func() bool {
		for _, f := range eventsOf[*events.ToolCallFinished](e.log) {
			if f.Call.Tool == "wait_second" {
				return true
			}
		}
		return false
	}
	barrier := func(ctx context.Context) error {
		started.Done()
		select {
		case <-bothStarted:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(waitLimit / 2):
			return errors.New("the other tool call never started: calls run sequentially")
		}
	}
	first := tool("wait.first", nil, func(ctx context.Context, _ *tools.Context, _ map[string]any) (any, error) {
		if err := barrier(ctx); err != nil {
			return nil, err
		}
		deadline := time.After(waitLimit / 2)
		for !secondFinished() { // finish after the second call
			select {
			case <-time.After(5 * time.Millisecond):
			case <-deadline:
				return nil, errors.New("the second call never finished")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return "first result", nil
	})
	second := tool("wait.second", nil, func(ctx context.Context, _ *tools.Context, _ map[string]any) (any, error) {
		if err := barrier(ctx); err != nil {
			return nil, err
		}
		return "second result", nil
	})
	e = newEnv(t, []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{call("wait_first", `{}`), call("wait_second", `{}`)}},
		{Text: "done"},
	}, withTools(first, second))
	e.mustRun("go")

	if got := toolMessages(e.requests()[1]); !reflect.DeepEqual(got, []any{"first result", "second result"}) {
		t.Errorf("model saw tool results %v", got)
	}
	chat := eventsOf[*events.ChatFinished](e.log)[0]
	if !reflect.DeepEqual(chat.ToolResults, []any{"first result", "second result"}) {
		t.Errorf("recorded results %v", chat.ToolResults)
	}
	fins := eventsOf[*events.ToolCallFinished](e.log)
	if len(fins) != 2 || fins[0].Call.Tool != "wait_second" {
		t.Errorf("ToolCallFinished order: second call should finish first, got %d events", len(fins))
	}
}

// TestToolErrorsReachModel: every failing call gives the model Bub's
// {kind, message, details?} as its result and the run goes on; the
// after_tool_call hook sees the original *bub.Error with its kind (checks
// 26-29, 44; malformed arguments are a tool error, never a failed run).
func TestToolErrorsReachModel(t *testing.T) {
	ts := []tools.Tool{
		tool("fail.plain", nil, func(context.Context, *tools.Context, map[string]any) (any, error) {
			return nil, errors.New("boom")
		}),
		tool("fail.typed", nil, func(context.Context, *tools.Context, map[string]any) (any, error) {
			return nil, &bub.Error{Kind: bub.KindNotFound, Message: "no such order", Details: map[string]any{"order": "A1"}}
		}),
		tool("fail.panic", nil, func(context.Context, *tools.Context, map[string]any) (any, error) {
			panic("kaput")
		}),
		tool("ok.tool", nil, func(context.Context, *tools.Context, map[string]any) (any, error) {
			return map[string]any{"n": 1}, nil
		}),
	}
	argErr := map[string]any{"kind": "invalid_input", "message": "Expected a function tool call with JSON object arguments."}
	cases := []struct {
		name  string
		call  fakellm.ToolCall
		want  map[string]any // kind, message and (when set) details of the model's tool result
		allow []string
	}{
		{"plain error", call("fail_plain", `{}`), map[string]any{"kind": "tool", "message": "Tool 'fail_plain' execution failed.", "details": map[string]any{"error": "boom"}}, nil},
		{"bub error passes through", call("fail_typed", `{}`), map[string]any{"kind": "not_found", "message": "no such order", "details": map[string]any{"order": "A1"}}, nil},
		{"panic", call("fail_panic", `{}`), map[string]any{"kind": "tool", "message": "Tool 'fail_panic' execution failed.", "details": map[string]any{"error": "panic: kaput"}}, nil},
		{"invalid arguments", call("text_upper", `{"text":1,"x":2}`), map[string]any{"kind": "invalid_input", "message": "Tool 'text_upper' argument validation failed."}, nil},
		{"unknown tool", call("no_such_tool", `{}`), map[string]any{"kind": "tool", "message": "Unknown tool name: no_such_tool."}, nil},
		{"tool not allowed", call("fail_plain", `{}`), map[string]any{"kind": "tool", "message": "Unknown tool name: fail_plain."}, []string{"ok.tool"}},
		{"arguments not an object", rawArgs("ok_tool", `[1, 2]`), argErr, nil},
		{"arguments not JSON", rawArgs("ok_tool", `{"not json`), argErr, nil},
		{"arguments with trailing data", rawArgs("ok_tool", `{} {}`), argErr, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls countCalls
			var mu sync.Mutex
			var seen []*tools.Result
			observer := afterTool{"observer", func(_ context.Context, in hooks.AfterToolCallInput) error {
				mu.Lock()
				seen = append(seen, in.Result)
				mu.Unlock()
				return nil
			}}
			e := newEnv(t, []fakellm.Step{{ToolCalls: []fakellm.ToolCall{tc.call}}, {Text: "handled"}},
				withTools(append(ts, upperTool(&calls))...), withPlugins(observer))
			out := e.mustRun("try it", func(r *agent.Run) { r.AllowedTools = tc.allow })
			if !out.OK || out.Text != "handled" {
				t.Errorf("output %+v", out)
			}
			got := toolMessages(e.requests()[1])
			if len(got) != 1 {
				t.Fatalf("model saw %d tool results", len(got))
			}
			m, _ := got[0].(map[string]any)
			if m["kind"] != tc.want["kind"] || m["message"] != tc.want["message"] {
				t.Errorf("model saw %v, want kind/message of %v", got[0], tc.want)
			}
			if d, ok := tc.want["details"]; ok && !reflect.DeepEqual(m["details"], d) {
				t.Errorf("details %v, want %v", m["details"], d)
			}
			if len(seen) != 1 {
				t.Fatalf("after_tool_call ran %d times", len(seen))
			}
			var be *bub.Error
			if !errors.As(seen[0].Err, &be) || string(be.Kind) != tc.want["kind"] || be.Message != tc.want["message"] {
				t.Errorf("after_tool_call error %#v", seen[0].Err)
			}
			if len(calls.get()) != 0 {
				t.Errorf("text.upper ran with %v", calls.get())
			}
		})
	}
	t.Run("success has no error", func(t *testing.T) {
		var seen *tools.Result
		observer := afterTool{"observer", func(_ context.Context, in hooks.AfterToolCallInput) error { seen = in.Result; return nil }}
		e := newEnv(t, []fakellm.Step{{ToolCalls: []fakellm.ToolCall{call("ok_tool", `{}`)}}, {Text: "handled"}},
			withTools(ts...), withPlugins(observer))
		e.mustRun("try it")
		if seen == nil || seen.Err != nil || !reflect.DeepEqual(seen.Result, map[string]any{"n": 1}) || seen.Tool != "ok_tool" || seen.RunID != testRunID {
			t.Errorf("after_tool_call result %+v", seen)
		}
		if got := toolMessages(e.requests()[1]); !reflect.DeepEqual(got, []any{map[string]any{"n": float64(1)}}) {
			t.Errorf("model saw %v", got)
		}
	})
}

// TestContinuePrompt (check 37): after a step with tool calls the
// continue_prompt hook runs once with the initial prompt and that step's
// usage, and the next step's user message is its answer.
func TestContinuePrompt(t *testing.T) {
	var calls countCalls
	var mu sync.Mutex
	var inputs []hooks.ContinuePromptInput
	cont := continuer{"cont", func(_ context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
		mu.Lock()
		inputs = append(inputs, in)
		mu.Unlock()
		return "next step please", true, nil
	}}
	usage := &fakellm.Usage{PromptTokens: 11, CompletionTokens: 2, TotalTokens: 13}
	e := newEnv(t, []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{call("text_upper", `{"text":"a"}`)}, Usage: usage},
		{Text: "done"},
	}, withTools(upperTool(&calls)), withPlugins(cont))
	out := e.mustRun("initial prompt")

	if len(inputs) != 1 {
		t.Fatalf("continue_prompt ran %d times", len(inputs))
	}
	in := inputs[0]
	if in.Prompt.PlainText() != "initial prompt" || in.Step != 1 || in.RunID != testRunID || in.SessionID != testSession || in.State != e.state {
		t.Errorf("continue_prompt input %+v", in)
	}
	if in.Usage == nil || in.Usage.PromptTokens != 11 || in.Usage.TotalTokens != 13 {
		t.Errorf("continue_prompt usage %+v", in.Usage)
	}
	if got := userTexts(e.requests()[1]); !slices.Equal(got, []string{"initial prompt", "next step please"}) {
		t.Errorf("second request user messages %q", got)
	}
	if out.Steps != 2 || out.Text != "done" {
		t.Errorf("output %+v", out)
	}
}

// TestContinuePromptUsageIsTheStepsOwn: continue_prompt gets the usage of
// the step that just finished, nil when a finish decision skipped its
// provider call, never an earlier step's.
func TestContinuePromptUsageIsTheStepsOwn(t *testing.T) {
	var calls countCalls
	var mu sync.Mutex
	var usages []*llm.Usage
	cont := continuer{"cont", func(_ context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
		mu.Lock()
		usages = append(usages, in.Usage)
		mu.Unlock()
		return fmt.Sprintf("continue after step %d", in.Step), true, nil
	}}
	e := newEnv(t, []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{call("text_upper", `{"text":"a"}`)}, Usage: &fakellm.Usage{PromptTokens: 11, TotalTokens: 11}},
		{Text: "done"},
	}, withTools(upperTool(&calls)), withPlugins(cont))
	events.On(e.bus, func(_ context.Context, ev *events.LLMCallStarted) error {
		if userTexts(llmRequest(ev.Request))[len(userTexts(llmRequest(ev.Request)))-1] == "continue after step 1" {
			ev.Decision = llm.Finish("skipped")
		}
		return nil
	})
	ends := 0
	events.On(e.bus, func(_ context.Context, ev *events.MessagesPending) error {
		if ev.AtStepEnd && ends == 0 {
			ends++
			ev.AppendUser(llm.Text("more"))
		}
		return nil
	})
	out := e.mustRun("go")
	if out.Steps != 3 || len(usages) != 2 {
		t.Fatalf("%d steps, continue_prompt ran %d times", out.Steps, len(usages))
	}
	if usages[0] == nil || usages[0].PromptTokens != 11 || usages[1] != nil {
		t.Errorf("continue_prompt usages %+v, %+v; want step 1's, then nil", usages[0], usages[1])
	}
}

// llmRequest wraps a request's messages for userTexts.
func llmRequest(r llm.Request) fakellm.Request { return fakellm.Request{Messages: r.Messages} }

// TestMaxSteps: a run that uses every allowed step fails with an error
// wrapping ErrMaxSteps.
func TestMaxSteps(t *testing.T) {
	var calls countCalls
	e := newEnv(t, []fakellm.Step{{Repeat: true, ToolCalls: []fakellm.ToolCall{call("text_upper", `{"text":"a"}`)}}},
		withTools(upperTool(&calls)), withSettings(agent.Settings{Model: "openai:fake", MaxSteps: 2}))
	out, err := e.run("loop forever")
	if !errors.Is(err, agent.ErrMaxSteps) || err.Error() != "max_steps_reached=2" {
		t.Fatalf("err = %v", err)
	}
	if out.Steps != 2 || out.OK || len(e.requests()) != 2 || len(calls.get()) != 2 {
		t.Errorf("output %+v after %d requests and %d tool calls", out, len(e.requests()), len(calls.get()))
	}
	fin := eventsOf[*events.RunFinished](e.log)
	if len(fin) != 1 || fin[0].Status != events.RunError || !errors.Is(fin[0].Err, agent.ErrMaxSteps) || fin[0].Steps != 2 {
		t.Errorf("RunFinished %+v", fin)
	}
}

// TestProviderError: a failed provider call emits LLMCallFinished with
// the error, then StepFinished(error); the run fails and nothing of the
// call is recorded (no ChatFinished, no message on the tape).
func TestProviderError(t *testing.T) {
	obs := 0
	after := afterLLM{"after", func(_ context.Context, in hooks.AfterLLMCallInput) error {
		obs++
		if in.Result.Err == nil {
			t.Error("after_llm_call without the error")
		}
		return nil
	}}
	e := newEnv(t, []fakellm.Step{{Error: &fakellm.Error{Status: 400, Message: "temperature is not supported", Type: "invalid_request_error"}}},
		withPlugins(after))
	_, err := e.run("hi")
	var be *bub.Error
	if !errors.As(err, &be) || be.Kind != bub.KindProvider || !strings.Contains(be.Message, "temperature is not supported") {
		t.Fatalf("err = %v", err)
	}
	want := []string{"RunStarted", "StepStarted", "MessagesPending(start)", "LLMCallStarted", "LLMCallFinished", "StepFinished(error)", "RunFinished(error)"}
	if got := e.log.labels(); !slices.Equal(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
	if fin := eventsOf[*events.LLMCallFinished](e.log)[0]; !errors.Is(fin.Result.Err, be) {
		t.Errorf("LLMCallFinished error %v", fin.Result.Err)
	}
	if obs != 1 {
		t.Errorf("after_llm_call ran %d times", obs)
	}
	for _, en := range e.tape.entries(t) {
		if en.Kind != tape.KindEvent && en.Kind != tape.KindAnchor {
			t.Errorf("recorded %s entry %v", en.Kind, en.Payload)
		}
	}
}

// overflow is a provider error matching the context-length pattern.
var overflow = &fakellm.Error{Status: 400, Message: "This model's maximum context length is 8192 tokens", Type: "invalid_request_error", Code: "context_length_exceeded"}

// TestContextOverflowHandoff: a context-length error hands off once
// (anchor auto_handoff/context_overflow) and retries with the original
// prompt in a new step; a second overflow fails the run.
func TestContextOverflowHandoff(t *testing.T) {
	t.Run("retry", func(t *testing.T) {
		var calls countCalls
		e := newEnv(t, []fakellm.Step{
			{ToolCalls: []fakellm.ToolCall{call("text_upper", `{"text":"a"}`)}},
			{Error: overflow},
			{Text: "recovered"},
		}, withTools(upperTool(&calls)))
		out := e.mustRun("the big task")

		if out.Steps != 3 || out.Text != "recovered" {
			t.Errorf("output %+v", out)
		}
		var statuses []string
		for _, f := range eventsOf[*events.StepFinished](e.log) {
			statuses = append(statuses, f.Status)
		}
		if !slices.Equal(statuses, []string{"continue", "auto_handoff", "ok"}) {
			t.Errorf("step statuses %v", statuses)
		}
		reqs := e.requests()
		if got := userTexts(reqs[1]); got[len(got)-1] != agent.DefaultContinuePrompt {
			t.Errorf("overflowing request's prompt %q", got)
		}
		// After the handoff the context starts after the new anchor: the
		// system prompt and the original prompt, none of step 1.
		third := reqs[2].Messages
		if len(third) != 2 || third[0].Role != llm.RoleSystem || third[1].Role != llm.RoleUser || third[1].Content.PlainText() != "the big task" {
			t.Errorf("retry request messages %+v", third)
		}
		if n := len(reqs[1].Messages); n != 5 { // system, prompt, tool call, tool result, continue prompt
			t.Errorf("overflowing request has %d messages", n)
		}
		anchors := anchorsNamed(e.tape.entries(t), "auto_handoff/context_overflow")
		if len(anchors) != 1 {
			t.Fatalf("%d overflow anchors", len(anchors))
		}
		st := anchors[0].Payload["state"].(map[string]any)
		if st["reason"] != "context_length_exceeded" || !strings.Contains(st["error"].(string), "maximum context length") {
			t.Errorf("anchor state %v", st)
		}
	})
	t.Run("second overflow fails", func(t *testing.T) {
		e := newEnv(t, []fakellm.Step{{Error: overflow}, {Error: overflow}, {Text: "never"}})
		_, err := e.run("the big task")
		if err == nil || !strings.Contains(err.Error(), "maximum context length") {
			t.Fatalf("err = %v", err)
		}
		var statuses []string
		for _, f := range eventsOf[*events.StepFinished](e.log) {
			statuses = append(statuses, f.Status)
		}
		if !slices.Equal(statuses, []string{"auto_handoff", "error"}) {
			t.Errorf("step statuses %v", statuses)
		}
		if n := len(anchorsNamed(e.tape.entries(t), "auto_handoff/context_overflow")); n != 1 {
			t.Errorf("%d overflow anchors", n)
		}
		if n := len(e.requests()); n != 2 {
			t.Errorf("%d requests", n)
		}
	})
}

// TestRateLimitIsNoOverflow: a rate-limit error whose text matches the
// context-length pattern ("tokens per min (TPM): Limit") fails the step
// without a handoff.
func TestRateLimitIsNoOverflow(t *testing.T) {
	e := newEnv(t, []fakellm.Step{
		{Error: &fakellm.Error{Status: 429, Message: "Rate limit reached for fake on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.", Type: "tokens", Code: "rate_limit_exceeded"}},
		{Text: "never"},
	})
	// No SDK retries: the first 429 is the answer.
	router, err := providers.NewRouter(llm.Config{Model: "openai:fake", APIBase: e.srvBase, APIKey: "x"},
		llm.WithFactory(openai.Factory(openai.WithMaxRetries(0))))
	if err != nil {
		t.Fatal(err)
	}
	e.models = router
	_, err = e.run("hi")
	if err == nil || !strings.Contains(err.Error(), "HTTP 429") {
		t.Fatalf("err = %v", err)
	}
	var statuses []string
	for _, f := range eventsOf[*events.StepFinished](e.log) {
		statuses = append(statuses, f.Status)
	}
	if !slices.Equal(statuses, []string{"error"}) || len(anchorsNamed(e.tape.entries(t), "auto_handoff/context_overflow")) != 0 {
		t.Errorf("step statuses %v, tape %v", statuses, kinds(e.tape.entries(t)))
	}
}

func anchorsNamed(es []tape.Entry, name string) []tape.Entry {
	var out []tape.Entry
	for _, e := range es {
		if e.Kind == tape.KindAnchor && e.Payload["name"] == name {
			out = append(out, e)
		}
	}
	return out
}

// TestCancellation (checks 32-33): a run cancelled while the model
// streams, while the provider has not answered yet, or while a tool runs
// emits no LLMCallFinished / ToolCallFinished (and the after hooks do not
// fire); it fails with the context's error and RunFinished(cancelled).
func TestCancellation(t *testing.T) {
	blocking := func(cancel *context.CancelFunc) tools.Tool {
		return tool("block", nil, func(ctx context.Context, _ *tools.Context, _ map[string]any) (any, error) {
			(*cancel)()
			<-ctx.Done()
			return nil, ctx.Err()
		})
	}
	cases := []struct {
		name  string
		steps []fakellm.Step
		// arm cancels the run at the right moment.
		arm           func(e *env, cancel context.CancelFunc, r *agent.Run)
		wantLLMStarts int
		wantToolStart int
	}{
		{
			name:  "mid-stream",
			steps: []fakellm.Step{{Text: "one two three four five six", Chunks: 6, ChunkDelay: fakellm.Duration(waitLimit)}},
			arm: func(_ *env, cancel context.CancelFunc, r *agent.Run) {
				r.OnDelta = func(agent.Delta) { cancel() }
			},
			wantLLMStarts: 1,
		},
		{
			name:  "before the first byte",
			steps: []fakellm.Step{{Text: "slow", Delay: fakellm.Duration(waitLimit)}},
			arm: func(e *env, cancel context.CancelFunc, _ *agent.Run) {
				go func() {
					ctx, stop := context.WithTimeout(context.Background(), waitLimit)
					defer stop()
					_, _ = e.srv.WaitRequests(ctx, 1)
					cancel()
				}()
			},
			wantLLMStarts: 1,
		},
		{
			name:          "during a tool",
			steps:         []fakellm.Step{{ToolCalls: []fakellm.ToolCall{call("block", `{}`)}}, {Text: "never"}},
			arm:           func(*env, context.CancelFunc, *agent.Run) {},
			wantLLMStarts: 1,
			wantToolStart: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			var afterLLMs, afterTools atomic.Int32
			e := newEnv(t, tc.steps, withTools(blocking(&cancel)), withPlugins(
				afterLLM{"after-llm", func(context.Context, hooks.AfterLLMCallInput) error { afterLLMs.Add(1); return nil }},
				afterTool{"after-tool", func(context.Context, hooks.AfterToolCallInput) error { afterTools.Add(1); return nil }},
			))
			r := e.newRun("hi")
			tc.arm(e, cancel, &r)
			_, err := e.agent().Run(ctx, r)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if n := len(eventsOf[*events.LLMCallStarted](e.log)); n != tc.wantLLMStarts {
				t.Errorf("%d LLMCallStarted", n)
			}
			if n := len(eventsOf[*events.ToolCallStarted](e.log)); n != tc.wantToolStart {
				t.Errorf("%d ToolCallStarted", n)
			}
			// The tool step's model call completed before the tool ran.
			wantLLMFin := tc.wantToolStart
			if n := len(eventsOf[*events.LLMCallFinished](e.log)); n != wantLLMFin || int(afterLLMs.Load()) != wantLLMFin {
				t.Errorf("%d LLMCallFinished, after_llm_call ran %d times; want %d", n, afterLLMs.Load(), wantLLMFin)
			}
			if n := len(eventsOf[*events.ToolCallFinished](e.log)); n != 0 || afterTools.Load() != 0 {
				t.Errorf("%d ToolCallFinished, after_tool_call ran %d times after cancellation", n, afterTools.Load())
			}
			if n := len(eventsOf[*events.ChatFinished](e.log)); n != 0 {
				t.Errorf("%d ChatFinished", n)
			}
			fin := eventsOf[*events.RunFinished](e.log)
			if len(fin) != 1 || fin[0].Status != events.RunCancelled {
				t.Errorf("RunFinished %+v", fin)
			}
		})
	}
}

// TestEmptyPrompt (check 36): an empty prompt answers "error: empty
// prompt" with OK false, emits no event and calls no model.
func TestEmptyPrompt(t *testing.T) {
	for _, prompt := range []llm.Content{llm.Text(""), {Parts: []llm.Part{}}} {
		e := newEnv(t, nil)
		out, err := e.agent().Run(context.Background(), e.newRun("", func(r *agent.Run) { r.Prompt = prompt }))
		if err != nil || out.Text != "error: empty prompt" || out.OK {
			t.Errorf("prompt %+v: output %+v, err %v", prompt, out, err)
		}
		if e.text() != "error: empty prompt" {
			t.Errorf("streamed %q", e.text())
		}
		if got := e.log.labels(); len(got) != 0 {
			t.Errorf("events %v", got)
		}
		if n := len(e.requests()); n != 0 {
			t.Errorf("%d requests", n)
		}
		if n := len(e.tape.entries(t)); n != 0 {
			t.Errorf("%d tape entries", n)
		}
	}
}

// TestModelSelection (check 35): an explicit model is used for the call
// without changing the settings; without one the settings' model is used.
func TestModelSelection(t *testing.T) {
	e := newEnv(t, nil)
	a := e.agent()
	ctx := context.Background()
	if _, err := a.Run(ctx, e.newRun("one", func(r *agent.Run) { r.Model = "openai:explicit" })); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, e.newRun("two")); err != nil {
		t.Fatal(err)
	}
	reqs := e.requests()
	if len(reqs) != 2 || reqs[0].Model != "explicit" || reqs[1].Model != "fake" {
		t.Fatalf("models %q, %q", reqs[0].Model, reqs[1].Model)
	}
	started := eventsOf[*events.RunStarted](e.log)
	if started[0].Model != "openai:explicit" || started[1].Model != "openai:fake" {
		t.Errorf("RunStarted models %q, %q", started[0].Model, started[1].Model)
	}
	// The second run sees the first one's interaction.
	if got := userTexts(reqs[1]); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("second run's user messages %q", got)
	}
}

// TestAllowedTools (checks 39-41): allowed names resolve like Bub's
// resolve_tool_names (runtime or model names, trimmed, any case); only the
// allowed agent-usable tools are offered and listed in the system prompt;
// an unknown allowed name fails the run naming it.
func TestAllowedTools(t *testing.T) {
	var calls countCalls
	hidden := tool("secret.tool", nil, func(context.Context, *tools.Context, map[string]any) (any, error) { return "s", nil })
	hidden.Hidden = true
	other := tool("other.tool", nil, func(context.Context, *tools.Context, map[string]any) (any, error) { return "o", nil })
	t.Run("offered", func(t *testing.T) {
		e := newEnv(t, []fakellm.Step{{Text: "ok"}}, withTools(upperTool(&calls), hidden, other))
		e.mustRun("hi", func(r *agent.Run) { r.AllowedTools = []string{" Text_Upper ", "secret.tool"} })
		req := e.requests()[0]
		offered, _ := req.Fields["tools"].([]any)
		var names []string
		for _, o := range offered {
			names = append(names, o.(map[string]any)["function"].(map[string]any)["name"].(string))
		}
		if !slices.Equal(names, []string{"text_upper"}) {
			t.Errorf("offered tools %v", names)
		}
		sys := req.Messages[0].Content.PlainText()
		if !strings.Contains(sys, "text_upper(") || strings.Contains(sys, "other_tool") || strings.Contains(sys, "secret_tool") {
			t.Errorf("system prompt %q", sys)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		e := newEnv(t, []fakellm.Step{{Text: "ok"}}, withTools(upperTool(&calls)))
		_, err := e.run("hi", func(r *agent.Run) { r.AllowedTools = []string{"nope", "text.upper"} })
		var ute *tools.UnknownToolsError
		if !errors.As(err, &ute) || !strings.Contains(err.Error(), "'nope'") {
			t.Fatalf("err = %v", err)
		}
		if n := len(e.requests()); n != 0 {
			t.Errorf("%d requests", n)
		}
		if got := e.log.labels(); !slices.Equal(got, []string{"RunStarted", "StepStarted", "StepFinished(error)", "RunFinished(error)"}) {
			t.Errorf("events %v", got)
		}
	})
}

// TestBuiltinFsRead: the real builtin fs.read tool reads a file of the
// run's workspace for the model.
func TestBuiltinFsRead(t *testing.T) {
	shells, err := toolkit.NewShells()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shells.Close() })
	reg := &tools.Registry{}
	if err := toolkit.Register(reg, toolkit.Options{Shells: shells}); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "note.txt"), []byte("line one\nline two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, []fakellm.Step{{ToolCalls: []fakellm.ToolCall{call("fs_read", `{"path":"note.txt","offset":1}`)}}, {Text: "read it"}})
	e.tools = reg
	e.mustRun("read the note", func(r *agent.Run) {
		r.ToolContext = func(tc *tools.Context) { tc.Workspace = ws }
	})
	if got := toolMessages(e.requests()[1]); !reflect.DeepEqual(got, []any{"line two"}) {
		t.Errorf("model saw %v", got)
	}
	if sys := e.requests()[0].Messages[0].Content.PlainText(); !strings.Contains(sys, "- fs_read(path, offset?, limit?)") {
		t.Errorf("system prompt lacks fs_read: %q", sys)
	}
}

// TestSystemPrompt: the hooks' fragment and the tools block are joined
// with a blank line; the fragment function gets the step's prompt text and
// the turn state.
func TestSystemPrompt(t *testing.T) {
	var calls countCalls
	e := newEnv(t, []fakellm.Step{{Text: "ok"}}, withTools(upperTool(&calls)),
		withSystem(func(_ context.Context, prompt string, st *bub.State) (string, error) {
			return fmt.Sprintf("You answer %q for %s.", prompt, st.String("session_id")), nil
		}))
	e.mustRun("hi")
	want := "You answer \"hi\" for session-test.\n\n<available_tools>\n- text_upper(text): test tool text.upper\n</available_tools>"
	if got := e.requests()[0].Messages[0]; got.Role != llm.RoleSystem || got.Content.PlainText() != want {
		t.Errorf("system message %+v\nwant %q", got, want)
	}
}

// TestSkillsBlock: with Settings.Skills the skills block of the state's
// workspace follows the tools block; a skill the step's prompt names as
// $name is expanded (so only in the first step: later steps' prompt is
// the continue prompt), and allowed_skills limits the block.
func TestSkillsBlock(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, skills.ProjectDir, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, skills.FileName), []byte("---\nname: demo\ndescription: A demo\n---\nLook in $SKILL_DIR.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	catalog := skills.New(skills.Options{Home: t.TempDir()})
	var calls countCalls
	e := newEnv(t, []fakellm.Step{{ToolCalls: []fakellm.ToolCall{call("text_upper", `{"text":"a"}`)}}, {Text: "ok"}},
		withTools(upperTool(&calls)), withSettings(agent.Settings{Model: "openai:fake", Skills: catalog}))
	e.state.Set(bub.StateWorkspace, ws)
	e.mustRun("follow $demo")
	toolsBlock := "<available_tools>\n- text_upper(text): test tool text.upper\n</available_tools>"
	expanded := toolsBlock + "\n\n<available_skills>\n- demo: A demo\n  Location: " + filepath.Join(dir, skills.FileName) + "\nLook in " + dir + ".\n</available_skills>"
	listed := toolsBlock + "\n\n<available_skills>\n- demo: A demo\n</available_skills>"
	reqs := e.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, want := range []string{expanded, listed} {
		if got := reqs[i].Messages[0]; got.Role != llm.RoleSystem || got.Content.PlainText() != want {
			t.Errorf("step %d system message %q\nwant %q", i+1, got.Content.PlainText(), want)
		}
	}

	e = newEnv(t, []fakellm.Step{{Text: "ok"}}, withTools(upperTool(&calls)), withSettings(agent.Settings{Model: "openai:fake", Skills: catalog}))
	e.state.Set(bub.StateWorkspace, ws)
	e.state.Set(bub.StateAllowedSkills, []string{"other"})
	e.mustRun("follow $demo")
	if got := e.requests()[0].Messages[0].Content.PlainText(); got != toolsBlock {
		t.Errorf("system prompt with demo not allowed %q", got)
	}
}

// failingTape is a tape whose context cannot be read.
type failingTape struct {
	*testTape
	err error
}

func (f failingTape) ReadMessages(context.Context) ([]llm.Message, error) { return nil, f.err }

// TestContextReadError: when the tape context cannot be read, the step
// records ChatFinished with the system prompt and the error (as both the
// context error and the step's error, like Bub's record_chat), calls no
// model and fails the run.
func TestContextReadError(t *testing.T) {
	var calls countCalls
	readErr := &bub.Error{Kind: bub.KindNotFound, Message: "No anchors found in tape."}
	e := newEnv(t, nil, withTools(upperTool(&calls)))
	_, err := e.run("hi", func(r *agent.Run) { r.Tape = failingTape{e.tape, readErr} })
	if !errors.Is(err, readErr) {
		t.Fatalf("err = %v", err)
	}
	want := []string{"RunStarted", "StepStarted", "MessagesPending(start)", "ChatFinished", "StepFinished(error)", "RunFinished(error)"}
	if got := e.log.labels(); !slices.Equal(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
	chat := eventsOf[*events.ChatFinished](e.log)[0]
	if chat.ContextErr != readErr || chat.Err != readErr || chat.NewMessages != nil || !strings.Contains(chat.SystemPrompt, "text_upper") {
		t.Errorf("ChatFinished %+v", chat)
	}
	if n := len(e.requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
	var got []string
	for _, en := range e.tape.entries(t) {
		if en.Kind != tape.KindEvent || en.Payload["name"] == "run" {
			got = append(got, en.Kind)
		}
	}
	if !slices.Equal(got, []string{tape.KindAnchor, tape.KindSystem, tape.KindError, tape.KindEvent}) {
		t.Errorf("recorded %v", got)
	}
}

// TestBeforeLLMCallRequestIsEffective: what a before_llm_call hook makes
// of the request is what the provider gets and what is recorded — a
// withdrawn tool is not offered (nil tool names keep the tools, an empty
// list withdraws them all), and a rewritten user message is the one
// ChatFinished (the tape) records.
func TestBeforeLLMCallRequestIsEffective(t *testing.T) {
	offeredNames := func(req fakellm.Request) []string {
		offered, _ := req.Fields["tools"].([]any)
		var names []string
		for _, o := range offered {
			names = append(names, o.(map[string]any)["function"].(map[string]any)["name"].(string))
		}
		return names
	}
	other := tool("other.tool", nil, func(context.Context, *tools.Context, map[string]any) (any, error) { return "o", nil })
	for _, tc := range []struct {
		name  string
		tools []string
		want  []string
	}{
		{"withdrawn", []string{"text_upper"}, []string{"text_upper"}},
		{"kept", nil, []string{"other_tool", "text_upper"}},
		{"none", []string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls countCalls
			rewrite := beforeLLM{"rewrite", func(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
				req := in.Request.Clone()
				req.ToolNames = tc.tools
				last := len(req.Messages) - 1
				req.Messages[last] = llm.Message{Role: llm.RoleUser, Content: llm.Text("rewritten")}
				return &req, nil, nil
			}}
			e := newEnv(t, []fakellm.Step{{Text: "ok"}}, withTools(upperTool(&calls), other), withPlugins(rewrite))
			e.mustRun("original")
			req := e.requests()[0]
			if got := offeredNames(req); !slices.Equal(got, tc.want) {
				t.Errorf("offered tools %v, want %v", got, tc.want)
			}
			if got := req.LastUserText(); got != "rewritten" {
				t.Errorf("the provider got user text %q", got)
			}
			chat := eventsOf[*events.ChatFinished](e.log)[0]
			if len(chat.NewMessages) != 1 || chat.NewMessages[0].Content.PlainText() != "rewritten" {
				t.Errorf("ChatFinished new messages %+v", chat.NewMessages)
			}
		})
	}
}
