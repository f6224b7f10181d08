package events_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// TestLifecycleActions mirrors docs/events/README.md's event table row by
// row: each event carries the turn state, and each row proves the action
// the table allows on it.
func TestLifecycleActions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		event, action string
		run           func(t *testing.T, b *events.Bus, meta events.Meta)
	}{
		{"RunStarted", "observe prompt, model and metadata", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var got *events.RunStarted
			events.On(b, func(_ context.Context, ev *events.RunStarted) error { got = ev; return nil })
			mustEmit(t, b, &events.RunStarted{Meta: meta, Prompt: llm.Text("hi"), Model: "openai:gpt", Metadata: events.RunMetadata{AllowedTools: []string{"bash"}}})
			if got.Prompt.Text != "hi" || got.Model != "openai:gpt" || got.Metadata.AllowedTools == nil {
				t.Fatalf("handler saw %+v", got)
			}
		}},
		{"RunFinished", "observe status, steps, duration and error", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var got *events.RunFinished
			events.On(b, func(_ context.Context, ev *events.RunFinished) error { got = ev; return nil })
			mustEmit(t, b, &events.RunFinished{Meta: meta, Status: events.RunError, Steps: 3, DurationMS: 42, Err: errors.New("x")})
			if got.Status != events.RunError || got.Steps != 3 || got.DurationMS != 42 || got.Err == nil {
				t.Fatalf("handler saw %+v", got)
			}
		}},
		{"StepStarted", "observe progress", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var step int
			events.On(b, func(_ context.Context, ev *events.StepStarted) error { step = ev.Step; return nil })
			mustEmit(t, b, &events.StepStarted{Meta: meta, Step: 2})
			if step != 2 {
				t.Fatalf("step = %d", step)
			}
		}},
		{"StepFinished", "set next_prompt when status is continue", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.StepFinished) error {
				if ev.Status == events.StepContinue {
					ev.NextPrompt = "check the test output"
				}
				return nil
			})
			ev := mustEmit(t, b, &events.StepFinished{Meta: meta, Step: 1, Status: events.StepContinue, NextPrompt: "continue"})
			if ev.NextPrompt != "check the test output" {
				t.Fatalf("NextPrompt = %q", ev.NextPrompt)
			}
		}},
		{"MessagesPending", "append user messages; at step end they continue the run", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.MessagesPending) error {
				ev.AppendUser(llm.Text("steer: also run vet"))
				return nil
			})
			for _, atEnd := range []bool{false, true} {
				ev := mustEmit(t, b, &events.MessagesPending{Meta: meta, Step: 1, AtStepEnd: atEnd,
					Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("earlier")}}})
				if len(ev.Messages) != 2 || ev.Messages[1].Role != llm.RoleUser || ev.Messages[1].Content.Text != "steer: also run vet" {
					t.Fatalf("at end %v: messages = %+v", atEnd, ev.Messages)
				}
			}
		}},
		{"LLMCallStarted", "replace the request", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.LLMCallStarted) error {
				ev.Request = ev.Request.Clone()
				ev.Request.Model, ev.Request.MaxTokens = "openai:small", 64
				return nil
			})
			ev := mustEmit(t, b, &events.LLMCallStarted{Meta: meta, Request: llm.Request{Model: "openai:big"}})
			if ev.Request.Model != "openai:small" || ev.Request.MaxTokens != 64 || ev.Stopped() {
				t.Fatalf("request = %+v, stopped %v", ev.Request, ev.Stopped())
			}
		}},
		{"LLMCallStarted", "finish(text) skips the later handlers", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.LLMCallStarted) error {
				ev.Decision = llm.Finish("cached answer")
				return nil
			})
			events.On(b, func(context.Context, *events.LLMCallStarted) error { t.Error("handler after finish ran"); return nil })
			ev := mustEmit(t, b, &events.LLMCallStarted{Meta: meta})
			if !ev.Stopped() || ev.Decision.Text != "cached answer" {
				t.Fatalf("decision = %+v", ev.Decision)
			}
		}},
		{"LLMCallFinished", "observe the accumulated result", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var got llm.Result
			events.On(b, func(_ context.Context, ev *events.LLMCallFinished) error { got = ev.Result; return nil })
			mustEmit(t, b, &events.LLMCallFinished{Meta: meta, Result: llm.Result{Text: "done", Usage: &llm.Usage{TotalTokens: 9}}})
			if got.Text != "done" || got.Usage.TotalTokens != 9 {
				t.Fatalf("result = %+v", got)
			}
		}},
		{"ToolCallStarted", "replace the call", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.ToolCallStarted) error {
				ev.Call = ev.Call.WithArguments(map[string]any{"cmd": "ls", "safe": true})
				return nil
			})
			var later tools.Call
			events.On(b, func(_ context.Context, ev *events.ToolCallStarted) error { later = ev.Call; return nil })
			orig := tools.Call{Tool: "bash", Arguments: map[string]any{"cmd": "ls"}}
			ev := mustEmit(t, b, &events.ToolCallStarted{Meta: meta, Call: orig})
			if ev.Call.Arguments["safe"] != true || later.Arguments["safe"] != true || orig.Arguments["safe"] != nil || ev.Stopped() {
				t.Fatalf("call = %+v, later %+v, orig %+v", ev.Call, later, orig)
			}
		}},
		{"ToolCallStarted", "deny stops the later handlers", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.ToolCallStarted) error {
				if ev.Call.Tool == "refund_order" {
					if ok, _ := ev.State.Get("refunds_allowed"); ok != true {
						ev.Decision = tools.Deny("Refunds require approval.")
					}
				}
				return nil
			})
			events.On(b, func(context.Context, *events.ToolCallStarted) error { t.Error("handler after deny ran"); return nil })
			ev := mustEmit(t, b, &events.ToolCallStarted{Meta: meta, Call: tools.Call{Tool: "refund_order"}})
			if !ev.Stopped() || ev.Decision.Action != tools.ActionDeny {
				t.Fatalf("decision = %+v", ev.Decision)
			}
		}},
		{"ToolCallStarted", "replace(result) stops the later handlers", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.ToolCallStarted) error {
				ev.Decision = tools.Replace("cached result")
				return nil
			})
			events.On(b, func(context.Context, *events.ToolCallStarted) error { t.Error("handler after replace ran"); return nil })
			ev := mustEmit(t, b, &events.ToolCallStarted{Meta: meta, Call: tools.Call{Tool: "fs_read"}})
			if !ev.Stopped() || ev.Decision.Result != "cached result" {
				t.Fatalf("decision = %+v", ev.Decision)
			}
		}},
		{"ToolCallStarted", "a proceed decision does not stop", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.ToolCallStarted) error {
				ev.Decision = tools.Proceed(map[string]any{"n": 1})
				return nil
			})
			ran := false
			events.On(b, func(context.Context, *events.ToolCallStarted) error { ran = true; return nil })
			if ev := mustEmit(t, b, &events.ToolCallStarted{Meta: meta}); ev.Stopped() || !ran {
				t.Fatalf("stopped %v, later handler ran %v", ev.Stopped(), ran)
			}
		}},
		{"ToolCallFinished", "assign result.result to change the returned value", func(t *testing.T, b *events.Bus, meta events.Meta) {
			events.On(b, func(_ context.Context, ev *events.ToolCallFinished) error {
				ev.Result.Result = "redacted"
				return nil
			})
			var later any
			events.On(b, func(_ context.Context, ev *events.ToolCallFinished) error { later = ev.Result.Result; return nil })
			res := &tools.Result{Tool: "fs_read", Result: "secret", DurationMS: 3}
			mustEmit(t, b, &events.ToolCallFinished{Meta: meta, Call: tools.Call{Tool: "fs_read"}, Result: res})
			if res.Result != "redacted" || later != "redacted" {
				t.Fatalf("executor sees %v, later handler %v", res.Result, later)
			}
		}},
		{"ChatFinished", "observe the interaction", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var got *events.ChatFinished
			events.On(b, func(_ context.Context, ev *events.ChatFinished) error { got = ev; return nil })
			text := "hello"
			mustEmit(t, b, &events.ChatFinished{Meta: meta, SystemPrompt: "sys", ResponseText: &text, Model: "gpt"})
			if got.SystemPrompt != "sys" || *got.ResponseText != "hello" {
				t.Fatalf("handler saw %+v", got)
			}
		}},
		{"CommandFinished", "observe command, status and output", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var got *events.CommandFinished
			events.On(b, func(_ context.Context, ev *events.CommandFinished) error { got = ev; return nil })
			mustEmit(t, b, &events.CommandFinished{Meta: meta, Command: "tape.info", Name: "tape.info", Status: events.CommandOK, Output: "entries: 3"})
			if got.Command != "tape.info" || got.Status != events.CommandOK || got.Output != "entries: 3" {
				t.Fatalf("handler saw %+v", got)
			}
		}},
		{"every agent event", "carries the turn state", func(t *testing.T, b *events.Bus, meta events.Meta) {
			var seen int
			events.On(b, func(_ context.Context, ev events.AgentEvent) error {
				m := ev.EventMeta()
				if m.State != meta.State || m.RunID != meta.RunID || m.SessionID != meta.SessionID {
					t.Errorf("%T meta = %+v", ev, m)
				}
				seen++
				return nil
			})
			all := allEvents(meta)
			for _, ev := range all {
				if _, err := events.Emit(ctx, b, ev); err != nil {
					t.Fatal(err)
				}
			}
			if seen != len(all) {
				t.Fatalf("AgentEvent handler saw %d of %d events", seen, len(all))
			}
		}},
		{"custom TapeEvent", "a handler records it on the tape", func(t *testing.T, b *events.Bus, meta events.Meta) {
			tape := &memTape{}
			events.On(b, func(ctx context.Context, ev *orderReviewed) error {
				return ev.Tape.AppendEvent(ctx, "order.reviewed", map[string]any{"order_id": ev.OrderID})
			})
			var tapeEvents int
			events.On(b, func(_ context.Context, ev events.TapeEvent) error {
				if ev.EventTape() == nil {
					t.Error("tape event without tape")
				}
				tapeEvents++
				return nil
			})
			mustEmit(t, b, &orderReviewed{TapeMeta: events.TapeMeta{Meta: meta, Tape: tape}, OrderID: "A123"})
			mustEmit(t, b, &events.StepStarted{Meta: meta})
			if len(tape.names) != 1 || tape.names[0] != "order.reviewed" || tapeEvents != 1 {
				t.Fatalf("tape = %v, tape events seen %d", tape.names, tapeEvents)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.event+"/"+tc.action, func(t *testing.T) {
			meta := events.Meta{State: bub.NewState(map[string]any{"session_id": "s1"}), RunID: "run-1", SessionID: "s1"}
			tc.run(t, &events.Bus{}, meta)
		})
	}
}

// orderReviewed is the custom tape event of Bub's events guide.
type orderReviewed struct {
	events.TapeMeta
	OrderID string `json:"order_id"`
}

// memTape is a TapeWriter that remembers the appended event names.
type memTape struct{ names []string }

func (m *memTape) AppendEvent(_ context.Context, name string, _ map[string]any) error {
	m.names = append(m.names, name)
	return nil
}

// allEvents returns one of every built-in event with meta.
func allEvents(meta events.Meta) []events.Event {
	return []events.Event{
		&events.RunStarted{Meta: meta}, &events.RunFinished{Meta: meta},
		&events.StepStarted{Meta: meta}, &events.StepFinished{Meta: meta},
		&events.MessagesPending{Meta: meta},
		&events.LLMCallStarted{Meta: meta}, &events.LLMCallFinished{Meta: meta},
		&events.ToolCallStarted{Meta: meta}, &events.ToolCallFinished{Meta: meta, Result: &tools.Result{}},
		&events.ChatFinished{Meta: meta}, &events.CommandFinished{Meta: meta},
		&events.CommandChanged{Meta: meta}, &events.WorkChanged{Meta: meta}, &events.PromptChanged{Meta: meta},
		&events.HookDecision{Meta: meta}, &events.TapeEventRecorded{Meta: meta}, &events.TurnError{Meta: meta},
	}
}
