package taperec

import (
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

func describe(b Batch) string {
	var parts []string
	if b.Reset {
		parts = append(parts, "RESET")
	}
	for _, e := range b.Entries {
		d := e.Kind
		if name, ok := e.Payload["name"].(string); ok {
			d += ":" + name
		}
		if role, ok := e.Payload["role"].(string); ok {
			d += ":" + role
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, " ")
}

// TestMapMirrorsTheTapeRecorder pins what each recorded event leaves on
// the tape (Bub's TapeRecorder, in Bub's snapshot names).
func TestMapMirrorsTheTapeRecorder(t *testing.T) {
	answer := "hi"
	ctxErr := &events.ErrorData{Kind: "not_found", Message: "No anchors found in tape."}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		payload any
		want    string
	}{
		{"run started", &events.RunStartedData{Prompt: llm.Text("p"), Model: "echo:echo"}, "event:loop.start"},
		{"step started", &events.StepStartedData{Step: 1}, "event:loop.step.start"},
		{"step finished", &events.StepFinishedData{Step: 1, Status: "ok"}, "event:loop.step"},
		{"chat", &events.ChatFinishedData{SystemPrompt: "sys", NewMessages: []llm.Message{{Role: "user", Content: llm.Text("q")}}, ResponseText: &answer},
			"system message:user message:assistant event:run"},
		{"tool step", &events.ChatFinishedData{NewMessages: []llm.Message{{Role: "user", Content: llm.Text("q")}},
			ToolCalls: []llm.ToolCall{{ID: "c", Type: "function", Function: llm.FunctionCall{Name: "x", Arguments: "{}"}}}, ToolResults: []any{"r"}},
			"message:user tool_call tool_result event:run"},
		{"context error", &events.ChatFinishedData{ContextError: ctxErr}, "error event:run"},
		{"command", &events.CommandFinishedData{Command: "help", Name: "help", Status: "ok"}, "event:command"},
		{"run finished", &events.RunFinishedData{Status: "ok", Steps: 1}, "event:loop.finish"},
		{"decision", &events.HookDecisionData{Plugin: "policy", Hook: "before_tool_call", Action: "deny"}, "event:hook.decision"},
		{"custom", &events.TapeEventData{Name: "order.reviewed", Data: map[string]any{"id": "A1"}}, "event:order.reviewed"},
		{"handoff", &events.TapeEventData{Name: EventHandoff, Data: map[string]any{"name": "phase-1"}}, "anchor:phase-1 event:handoff"},
		{"reset", &events.TapeEventData{Name: EventReset, Data: map[string]any{"archive": true}}, "RESET anchor:session/start event:handoff"},
		{"not recorded", &events.LLMCallStartedData{Model: "m"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Map(tc.payload, "run-1", at)
			if got := describe(b); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, e := range b.Entries {
				if e.Meta["run_id"] != "run-1" || e.Date != tape.FormatDate(at) {
					t.Fatalf("entry %+v lacks the run id or the event time", e)
				}
			}
		})
	}
	ctx := Map(&events.ChatFinishedData{ContextError: ctxErr}, "run-1", at)
	if status := ctx.Entries[len(ctx.Entries)-1].Payload["data"].(map[string]any)["status"]; status != "error" {
		t.Fatalf("a context error recorded run status %v, want error", status)
	}
	if d := Map(&events.HookDecisionData{Plugin: "p"}, "run-1", at).Entries[0]; d.InContext() {
		t.Fatal("hook decisions must stay out of the model context")
	}
}
