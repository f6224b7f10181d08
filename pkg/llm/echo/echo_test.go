package echo_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/echo"
)

func TestComplete(t *testing.T) {
	user := func(c llm.Content) llm.Message { return llm.Message{Role: llm.RoleUser, Content: c} }
	tests := []struct {
		name       string
		msgs       []llm.Message
		wantText   string
		wantDeltas []string
		wantUsage  llm.Usage
	}{
		{
			name:       "short prompt",
			msgs:       []llm.Message{user(llm.Text("hello"))},
			wantText:   "hello",
			wantDeltas: []string{"hello"},
			wantUsage:  llm.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2},
		},
		{
			name: "last user message after the system prompt and a tool round",
			msgs: []llm.Message{
				{Role: llm.RoleSystem, Content: llm.Text("be kind")},
				user(llm.Text("first")),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Function: llm.FunctionCall{Name: "x"}}}},
				{Role: llm.RoleTool, ToolCallID: "c", Content: llm.Text("result")},
				user(llm.Text("  the  quick brown fox jumps\nover the lazy dog ")),
			},
			wantText:   "  the  quick brown fox jumps\nover the lazy dog ",
			wantDeltas: []string{"  the  ", "quick brown fox jumps\nover ", "the lazy dog "},
			wantUsage:  llm.Usage{PromptTokens: 13, CompletionTokens: 9, TotalTokens: 22},
		},
		{
			name: "content parts: the text parts",
			msgs: []llm.Message{user(llm.Content{Parts: []llm.Part{
				{Type: "text", Text: "look"},
				{Type: "image_url", ImageURL: &llm.URLPart{URL: "data:image/png;base64,AA"}},
				{Type: "text", Text: "at this"},
			}})},
			wantText:   "look\nat this",
			wantDeltas: []string{"look\nat ", "this"},
			wantUsage:  llm.Usage{PromptTokens: 3, CompletionTokens: 3, TotalTokens: 6},
		},
		{
			name:      "no user message",
			msgs:      []llm.Message{{Role: llm.RoleSystem, Content: llm.Text("only system")}},
			wantUsage: llm.Usage{PromptTokens: 2, TotalTokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deltas []string
			resp, err := echo.New().Complete(t.Context(), llm.Call{Model: "echo", Messages: tt.msgs, Tools: []llm.ToolSchema{{Name: "never"}}}, func(d llm.Delta) {
				if d.Kind != llm.DeltaText {
					t.Errorf("delta kind %q", d.Kind)
				}
				deltas = append(deltas, d.Text)
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tt.wantText || strings.Join(deltas, "") != tt.wantText || !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("text %q, deltas %q; want %q, %q", resp.Text, deltas, tt.wantText, tt.wantDeltas)
			}
			if resp.ToolCalls != nil || resp.Reasoning != "" {
				t.Errorf("echo called tools or reasoned: %+v", resp)
			}
			if *resp.Usage != tt.wantUsage {
				t.Errorf("usage = %+v, want %+v", *resp.Usage, tt.wantUsage)
			}
		})
	}
}

func TestCompleteCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := echo.New().Complete(ctx, llm.Call{}, nil); err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func ExampleProvider_Complete() {
	resp, _ := echo.New().Complete(context.Background(), llm.Call{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("ping")}},
	}, nil)
	fmt.Println(resp.Text, resp.Usage.TotalTokens)
	// Output: ping 2
}
