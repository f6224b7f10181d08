package tape_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

func TestConstructors(t *testing.T) {
	call := llm.ToolCall{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "fs_read", Arguments: `{"path":"a"}`}}
	callMap := map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "fs_read", "arguments": `{"path":"a"}`}}
	meta := map[string]any{"run_id": "r"}
	tests := []struct {
		name    string
		entry   tape.Entry
		kind    string
		payload map[string]any
	}{
		{"message from llm", tape.MessageEntry(llm.Message{Role: "user", Content: llm.Text("hi")}, meta),
			tape.KindMessage, map[string]any{"role": "user", "content": "hi"}},
		{"message with parts", tape.MessageEntry(llm.Message{Role: "user", Content: llm.Content{Parts: []llm.Part{{Type: "text", Text: "a"}}}}, meta),
			tape.KindMessage, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "a"}}}},
		{"message with tool calls", tape.MessageEntry(llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{call}}, meta),
			tape.KindMessage, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{callMap}}},
		{"message from map", tape.MessageEntry(map[string]any{"role": "user", "content": "x"}, meta),
			tape.KindMessage, map[string]any{"role": "user", "content": "x"}},
		{"system", tape.System("be brief", meta), tape.KindSystem, map[string]any{"content": "be brief"}},
		{"anchor", tape.Anchor("a", nil, meta), tape.KindAnchor, map[string]any{"name": "a"}},
		{"anchor with state", tape.Anchor("a", map[string]any{"k": "v"}, meta), tape.KindAnchor, map[string]any{"name": "a", "state": map[string]any{"k": "v"}}},
		{"tool calls", tape.ToolCalls([]llm.ToolCall{call}, meta), tape.KindToolCall, map[string]any{"calls": []any{callMap}}},
		{"tool calls from maps", tape.ToolCalls([]map[string]any{callMap}, meta), tape.KindToolCall, map[string]any{"calls": []any{callMap}}},
		{"tool results", tape.ToolResults([]any{"ok", map[string]any{"kind": "tool"}}, meta), tape.KindToolResult, map[string]any{"results": []any{"ok", map[string]any{"kind": "tool"}}}},
		{"no tool results", tape.ToolResults(nil, meta), tape.KindToolResult, map[string]any{"results": []any{}}},
		{"error", tape.ErrorEntry(&bub.Error{Kind: bub.KindTool, Message: "boom", Details: map[string]any{"code": 7}}, meta),
			tape.KindError, map[string]any{"kind": "tool", "message": "boom", "details": map[string]any{"code": 7}}},
		{"event", tape.Event("run", map[string]any{"status": "ok"}, meta), tape.KindEvent, map[string]any{"name": "run", "data": map[string]any{"status": "ok"}}},
		{"event without data", tape.Event("tick", nil, meta), tape.KindEvent, map[string]any{"name": "tick"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.entry
			if e.ID != 0 || e.Kind != tt.kind || !reflect.DeepEqual(e.Payload, tt.payload) || !reflect.DeepEqual(e.Meta, meta) {
				t.Fatalf("got %#v\nwant kind %s payload %#v meta %v", e, tt.kind, tt.payload, meta)
			}
			if _, err := time.Parse(time.RFC3339Nano, e.Date); err != nil || !strings.HasSuffix(e.Date, "+00:00") {
				t.Fatalf("date %q is not ISO-8601 UTC with +00:00", e.Date)
			}
		})
	}
}

func TestConstructorsMergeMetaAndCopyInputs(t *testing.T) {
	state := map[string]any{"k": "v"}
	e := tape.Anchor("a", state, map[string]any{"run_id": "r", "x": 1}, map[string]any{"x": 2})
	state["k"] = "changed"
	if e.Payload["state"].(map[string]any)["k"] != "v" {
		t.Fatal("Anchor kept a reference to the caller's state")
	}
	if !reflect.DeepEqual(e.Meta, map[string]any{"run_id": "r", "x": 2}) {
		t.Fatalf("meta %v: later maps must win", e.Meta)
	}
	if e := tape.System("s"); e.Meta == nil || len(e.Meta) != 0 {
		t.Fatalf("meta without maps = %#v, want {}", e.Meta)
	}
}

func TestFormatDate(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 5, 14, 10, 11, 12, 0, time.UTC), "2026-05-14T10:11:12+00:00"},
		{time.Date(2026, 5, 14, 10, 11, 12, 123456789, time.UTC), "2026-05-14T10:11:12.123456+00:00"},
		{time.Date(2026, 5, 14, 12, 11, 12, 500, time.FixedZone("", 2*3600)), "2026-05-14T10:11:12+00:00"},
		{time.Date(2026, 5, 14, 10, 11, 12, 1000, time.UTC), "2026-05-14T10:11:12.000001+00:00"},
	}
	for _, tt := range tests {
		if got := tape.FormatDate(tt.in); got != tt.want {
			t.Errorf("FormatDate(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStripMedia(t *testing.T) {
	parts := []any{
		map[string]any{"type": "text", "text": "look"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:..."}},
		map[string]any{"type": "input_audio"},
	}
	tests := []struct {
		name    string
		payload map[string]any
		want    map[string]any
	}{
		{"content parts", map[string]any{"role": "user", "content": parts},
			map[string]any{"role": "user", "content": []any{parts[0]}}},
		{"prompt parts", map[string]any{"prompt": parts}, map[string]any{"prompt": []any{parts[0]}}},
		{"content wins over prompt", map[string]any{"content": "text", "prompt": parts},
			map[string]any{"content": "text", "prompt": parts}},
		{"plain text untouched", map[string]any{"content": "hi"}, map[string]any{"content": "hi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprint(tt.payload)
			got := tape.StripMedia(tape.Entry{Kind: tape.KindMessage, Payload: tt.payload})
			if !reflect.DeepEqual(got.Payload, tt.want) {
				t.Fatalf("payload %#v, want %#v", got.Payload, tt.want)
			}
			if fmt.Sprint(tt.payload) != before {
				t.Fatal("StripMedia modified its input")
			}
		})
	}
}

func TestEntryHelpers(t *testing.T) {
	if name, ok := tape.Anchor("a", nil).AnchorName(); !ok || name != "a" {
		t.Fatalf("AnchorName = %q, %v", name, ok)
	}
	if _, ok := tape.System("a").AnchorName(); ok {
		t.Fatal("a system entry has an anchor name")
	}
	tests := []struct {
		meta map[string]any
		want bool
	}{
		{nil, true},
		{map[string]any{"context": true}, true},
		{map[string]any{"context": "false"}, true},
		{map[string]any{"context": false}, false},
	}
	for _, tt := range tests {
		if got := (tape.Entry{Meta: tt.meta}).InContext(); got != tt.want {
			t.Errorf("InContext with meta %v = %v", tt.meta, got)
		}
	}
}
