package agent_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// This file pins the allowed actions of docs/events/README.md's event
// table, one test
// per row that allows one, through plain bus handlers.

// TestLLMCallStartedReplacesRequest: a handler replacing Request changes
// what the provider receives (model, max_tokens, messages) and what is
// observed and recorded afterwards (check 31).
func TestLLMCallStartedReplacesRequest(t *testing.T) {
	e := newEnv(t, []fakellm.Step{{Echo: true}}, withSettings(agent.Settings{Model: "openai:fake", MaxTokens: 100}))
	events.On(e.bus, func(_ context.Context, ev *events.LLMCallStarted) error {
		if ev.Request.MaxTokens != 100 || ev.Request.Model != "openai:fake" || ev.Request.RunID != testRunID {
			t.Errorf("request before replacement = %+v", ev.Request)
		}
		req := ev.Request.Clone()
		req.Model, req.MaxTokens = "openai:swapped", 77
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: llm.Text("appended")})
		ev.Request = req
		return nil
	})
	out := e.mustRun("hi")

	reqs := e.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	if reqs[0].Model != "swapped" || reqs[0].Fields["max_tokens"] != float64(77) {
		t.Errorf("provider got model %q, max_tokens %v", reqs[0].Model, reqs[0].Fields["max_tokens"])
	}
	if got := userTexts(reqs[0]); !slices.Equal(got, []string{"hi", "appended"}) {
		t.Errorf("provider user messages = %q", got)
	}
	if out.Text != "appended" {
		t.Errorf("output %q", out.Text)
	}
	fin := eventsOf[*events.LLMCallFinished](e.log)[0]
	if fin.Request.Model != "openai:swapped" || fin.Request.MaxTokens != 77 || fin.Result.Err != nil || fin.Result.Text != "appended" {
		t.Errorf("LLMCallFinished = %+v", fin)
	}
	if chat := eventsOf[*events.ChatFinished](e.log)[0]; chat.Model != "openai:swapped" {
		t.Errorf("ChatFinished model %q", chat.Model)
	}
	for _, en := range e.tape.entries(t) {
		if en.Kind == tape.KindEvent && en.Payload["name"] == "run" {
			if m := en.Payload["data"].(map[string]any)["model"]; m != "openai:swapped" {
				t.Errorf("tape run event model %v", m)
			}
		}
	}
}

// TestLLMCallStartedFinish: a finish decision skips the provider and the
// later handlers, emits no LLMCallFinished, and ChatFinished records the
// decision's text as the answer.
func TestLLMCallStartedFinish(t *testing.T) {
	e := newEnv(t, []fakellm.Step{{Text: "never"}})
	events.On(e.bus, func(_ context.Context, ev *events.LLMCallStarted) error {
		ev.Decision = llm.Finish("canned answer")
		return nil
	})
	later := 0
	events.On(e.bus, func(context.Context, *events.LLMCallStarted) error { later++; return nil })
	out := e.mustRun("hi")

	if n := len(e.requests()); n != 0 {
		t.Errorf("provider called %d times", n)
	}
	if later != 0 {
		t.Errorf("a handler after the decision ran %d times", later)
	}
	if n := len(eventsOf[*events.LLMCallFinished](e.log)); n != 0 {
		t.Errorf("%d LLMCallFinished for a skipped call", n)
	}
	chat := eventsOf[*events.ChatFinished](e.log)[0]
	if chat.ResponseText == nil || *chat.ResponseText != "canned answer" || len(chat.NewMessages) != 1 {
		t.Errorf("ChatFinished = %+v", chat)
	}
	if out.Text != "canned answer" || !out.OK || e.text() != "canned answer" {
		t.Errorf("output %+v, streamed %q", out, e.text())
	}
	msgs, err := e.tape.ReadMessages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	if last.Role != llm.RoleAssistant || last.Content.PlainText() != "canned answer" {
		t.Errorf("recorded answer = %+v", last)
	}
}

// toolSteps asks for text_upper({"text":"abc"}) and then answers "done".
func toolSteps() []fakellm.Step {
	return []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{call("text_upper", `{"text":"abc"}`)}},
		{Text: "done"},
	}
}

// TestToolCallStartedActions: replacing the call changes the arguments
// the tool gets; deny and replace skip the tool, stop the later handlers,
// still emit ToolCallFinished, and give the model the error or the
// substitute as the tool result.
func TestToolCallStartedActions(t *testing.T) {
	cases := []struct {
		name       string
		act        func(*events.ToolCallStarted)
		wantCalls  []map[string]any
		wantModel  any // the tool result in the model's next request
		wantErr    string
		wantResult any
		wantLater  int // runs of a handler registered after the acting one
	}{
		{
			name:       "replace arguments",
			act:        func(ev *events.ToolCallStarted) { ev.Call = ev.Call.WithArguments(map[string]any{"text": "xyz"}) },
			wantCalls:  []map[string]any{{"text": "xyz"}},
			wantModel:  "XYZ",
			wantResult: "XYZ",
			wantLater:  1,
		},
		{
			name:       "proceed with arguments",
			act:        func(ev *events.ToolCallStarted) { ev.Decision = tools.Proceed(map[string]any{"text": "pro"}) },
			wantCalls:  []map[string]any{{"text": "pro"}},
			wantModel:  "PRO",
			wantResult: "PRO",
			wantLater:  1,
		},
		{
			name:      "deny",
			act:       func(ev *events.ToolCallStarted) { ev.Decision = tools.Deny("Refunds require approval.") },
			wantModel: map[string]any{"kind": "tool", "message": "Refunds require approval."},
			wantErr:   "[tool] Refunds require approval.",
		},
		{
			name:      "deny without message",
			act:       func(ev *events.ToolCallStarted) { ev.Decision = tools.Deny("") },
			wantModel: map[string]any{"kind": "tool", "message": "Tool 'text_upper' call denied by policy hook."},
			wantErr:   "[tool] Tool 'text_upper' call denied by policy hook.",
		},
		{
			name:       "replace result",
			act:        func(ev *events.ToolCallStarted) { ev.Decision = tools.Replace("cached result") },
			wantModel:  "cached result",
			wantResult: "cached result",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls countCalls
			e := newEnv(t, toolSteps(), withTools(upperTool(&calls)))
			events.On(e.bus, func(_ context.Context, ev *events.ToolCallStarted) error { tc.act(ev); return nil })
			later := 0
			events.On(e.bus, func(context.Context, *events.ToolCallStarted) error { later++; return nil })
			out := e.mustRun("shout abc")

			if got := calls.get(); !reflect.DeepEqual(got, tc.wantCalls) {
				t.Errorf("tool calls = %v, want %v", got, tc.wantCalls)
			}
			if later != tc.wantLater {
				t.Errorf("later handler ran %d times, want %d", later, tc.wantLater)
			}
			reqs := e.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d provider requests", len(reqs))
			}
			if got := toolMessages(reqs[1]); !reflect.DeepEqual(got, []any{tc.wantModel}) {
				t.Errorf("model saw tool results %#v, want %#v", got, []any{tc.wantModel})
			}
			fins := eventsOf[*events.ToolCallFinished](e.log)
			if len(fins) != 1 {
				t.Fatalf("%d ToolCallFinished", len(fins))
			}
			res := fins[0].Result
			switch {
			case tc.wantErr == "" && res.Err != nil:
				t.Errorf("ToolCallFinished error %v", res.Err)
			case tc.wantErr != "" && (res.Err == nil || res.Err.Error() != tc.wantErr):
				t.Errorf("ToolCallFinished error %v, want %s", res.Err, tc.wantErr)
			}
			if !reflect.DeepEqual(res.Result, tc.wantResult) {
				t.Errorf("ToolCallFinished result %#v, want %#v", res.Result, tc.wantResult)
			}
			if !out.OK || out.Text != "done" || out.Steps != 2 {
				t.Errorf("output %+v", out)
			}
		})
	}
}

// TestToolCallFinishedRewritesResult: assigning Result.Result in a
// ToolCallFinished handler changes what later handlers, the recorded
// interaction and the model see.
func TestToolCallFinishedRewritesResult(t *testing.T) {
	var calls countCalls
	e := newEnv(t, toolSteps(), withTools(upperTool(&calls)))
	events.On(e.bus, func(_ context.Context, ev *events.ToolCallFinished) error {
		if ev.Result.Result != "ABC" {
			t.Errorf("tool result before rewrite %v", ev.Result.Result)
		}
		ev.Result.Result = "rewritten"
		return nil
	})
	var seen any
	events.On(e.bus, func(_ context.Context, ev *events.ToolCallFinished) error { seen = ev.Result.Result; return nil })
	e.mustRun("shout abc")

	if seen != "rewritten" {
		t.Errorf("later handler saw %v", seen)
	}
	if got := toolMessages(e.requests()[1]); !reflect.DeepEqual(got, []any{"rewritten"}) {
		t.Errorf("model saw %v", got)
	}
	chat := eventsOf[*events.ChatFinished](e.log)[0]
	if !reflect.DeepEqual(chat.ToolResults, []any{"rewritten"}) || chat.ResponseText != nil || len(chat.ToolCalls) != 1 {
		t.Errorf("ChatFinished = %+v", chat)
	}
}

// TestStepFinishedNextPrompt: after a tool step, StepFinished has status
// continue and the default continue prompt; the NextPrompt a handler sets
// becomes the next step's user message.
func TestStepFinishedNextPrompt(t *testing.T) {
	var calls countCalls
	e := newEnv(t, toolSteps(), withTools(upperTool(&calls)))
	events.On(e.bus, func(_ context.Context, ev *events.StepFinished) error {
		if ev.Status == events.StepContinue {
			if ev.NextPrompt != agent.DefaultContinuePrompt {
				t.Errorf("default next prompt %q", ev.NextPrompt)
			}
			ev.NextPrompt = "go on, please"
		}
		return nil
	})
	e.mustRun("shout abc")

	reqs := e.requests()
	if got := userTexts(reqs[1]); !slices.Equal(got, []string{"shout abc", "go on, please"}) {
		t.Errorf("second request user messages %q", got)
	}
	steps := eventsOf[*events.StepStarted](e.log)
	if len(steps) != 2 || steps[1].Prompt.PlainText() != "go on, please" || steps[1].Step != 2 {
		t.Errorf("second StepStarted = %+v", steps)
	}
}

// TestMessagesPendingAtStart: user messages a handler appends while the
// step builds its request go before the prompt, in order, and are
// recorded with it.
func TestMessagesPendingAtStart(t *testing.T) {
	e := newEnv(t, []fakellm.Step{{Text: "ok"}})
	events.On(e.bus, func(_ context.Context, ev *events.MessagesPending) error {
		if !ev.AtStepEnd {
			ev.AppendUser(llm.Text("note 1"))
			ev.AppendUser(llm.Text("note 2"))
		}
		return nil
	})
	e.mustRun("the prompt")

	if got := userTexts(e.requests()[0]); !slices.Equal(got, []string{"note 1", "note 2", "the prompt"}) {
		t.Errorf("user messages %q", got)
	}
	chat := eventsOf[*events.ChatFinished](e.log)[0]
	if len(chat.NewMessages) != 3 || chat.NewMessages[2].Content.PlainText() != "the prompt" {
		t.Errorf("recorded new messages %+v", chat.NewMessages)
	}
}

// TestMessagesPendingAtEndContinues: messages appended at the end of a
// step without tool calls make the run continue; they open the next step,
// before its (continue) prompt.
func TestMessagesPendingAtEndContinues(t *testing.T) {
	e := newEnv(t, []fakellm.Step{{Text: "first"}, {Text: "second"}})
	ends := 0
	events.On(e.bus, func(_ context.Context, ev *events.MessagesPending) error {
		if ev.AtStepEnd {
			ends++
			if ends == 1 {
				ev.AppendUser(llm.Text("one more thing"))
			}
		}
		return nil
	})
	out := e.mustRun("hi")

	if out.Steps != 2 || out.Text != "firstsecond" {
		t.Errorf("output %+v", out)
	}
	var statuses []string
	for _, f := range eventsOf[*events.StepFinished](e.log) {
		statuses = append(statuses, f.Status)
	}
	if !slices.Equal(statuses, []string{"continue", "ok"}) {
		t.Errorf("step statuses %v", statuses)
	}
	want := []string{"hi", "one more thing", agent.DefaultContinuePrompt}
	if got := userTexts(e.requests()[1]); !slices.Equal(got, want) {
		t.Errorf("second request user messages\n got %q\nwant %q", got, want)
	}
}
