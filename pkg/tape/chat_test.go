package tape_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

func TestChatEntries(t *testing.T) {
	text := "answer"
	empty := ""
	ctxErr := bub.Errorf(bub.KindNotFound, "No anchors found in tape.")
	runErr := bub.Errorf(bub.KindProvider, "down")
	call := llm.ToolCall{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: "{}"}}
	usage := &llm.Usage{PromptTokens: 8, CompletionTokens: 2, TotalTokens: 10, PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 3}}
	user := llm.Message{Role: "user", Content: llm.Text("hi")}

	// kinds renders entries as "kind" or "kind:name" for events.
	kinds := func(entries []tape.Entry) []string {
		var out []string
		for _, e := range entries {
			k := e.Kind
			if e.Kind == tape.KindEvent {
				k += ":" + e.Payload["name"].(string)
			}
			out = append(out, k)
		}
		return out
	}
	tests := []struct {
		name   string
		rec    tape.ChatRecord
		kinds  []string
		status string
	}{
		{"everything", tape.ChatRecord{
			RunID: "r", SystemPrompt: "sys", ContextError: ctxErr, NewMessages: []llm.Message{user, user},
			ToolCalls: []llm.ToolCall{call}, ToolResults: []any{"ok"}, Error: runErr, ResponseText: &text,
			Provider: "openai", Model: "gpt", Usage: usage,
		}, []string{"system", "error", "message", "message", "tool_call", "tool_result", "error", "message", "event:run"}, "error"},
		{"minimal", tape.ChatRecord{RunID: "r"}, []string{"event:run"}, "ok"},
		{"empty response and empty results are recorded", tape.ChatRecord{RunID: "r", ToolResults: []any{}, ResponseText: &empty},
			[]string{"tool_result", "message", "event:run"}, "ok"},
		{"the context error is not recorded twice", tape.ChatRecord{RunID: "r", SystemPrompt: "sys", ContextError: ctxErr, Error: ctxErr},
			[]string{"system", "error", "event:run"}, "error"},
		{"no calls, no tool_call entry", tape.ChatRecord{RunID: "r", ToolCalls: []llm.ToolCall{}, NewMessages: []llm.Message{user}},
			[]string{"message", "event:run"}, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tape.ChatEntries(tt.rec)
			if k := kinds(got); !reflect.DeepEqual(k, tt.kinds) {
				t.Fatalf("kinds %v, want %v", k, tt.kinds)
			}
			for _, e := range got {
				if !reflect.DeepEqual(e.Meta, map[string]any{"run_id": "r"}) {
					t.Fatalf("meta %v, want {run_id: r}", e.Meta)
				}
			}
			if status := got[len(got)-1].Payload["data"].(map[string]any)["status"]; status != tt.status {
				t.Fatalf("run status %v, want %s", status, tt.status)
			}
		})
	}

	full := tape.ChatEntries(tests[0].rec)
	run := full[len(full)-1].Payload["data"]
	wantRun := map[string]any{"status": "error", "provider": "openai", "model": "gpt", "usage": map[string]any{
		"prompt_tokens": 8.0, "completion_tokens": 2.0, "total_tokens": 10.0, "prompt_tokens_details": map[string]any{"cached_tokens": 3.0},
	}}
	if !reflect.DeepEqual(run, wantRun) {
		t.Fatalf("run data %#v\nwant %#v", run, wantRun)
	}
	if !reflect.DeepEqual(full[7].Payload, map[string]any{"role": "assistant", "content": "answer"}) {
		t.Fatalf("assistant message %#v", full[7].Payload)
	}
	if !reflect.DeepEqual(full[1].Payload, ctxErr.AsMap()) || !reflect.DeepEqual(full[6].Payload, runErr.AsMap()) {
		t.Fatalf("error entries %#v %#v", full[1].Payload, full[6].Payload)
	}

	at := time.Date(2026, 5, 14, 10, 0, 0, 0, time.UTC)
	for _, e := range tape.ChatEntries(tape.ChatRecord{RunID: "r", SystemPrompt: "s", Date: at}) {
		if e.Date != "2026-05-14T10:00:00+00:00" {
			t.Fatalf("date %q, want the record's date", e.Date)
		}
	}
}
