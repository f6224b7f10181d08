package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/bubbus/bub/pkg/llm"
)

// TestChanges: every field a before_llm_call decision changes is named,
// large ones by size, and an unchanged request has no changes.
func TestChanges(t *testing.T) {
	before := llm.Request{RunID: "r", Model: "openai:a", MaxTokens: 100, ToolNames: []string{"bash", "fs_read"},
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: llm.Text("You are Bub.")},
			{Role: llm.RoleUser, Content: llm.Text("hi")},
			{Role: llm.RoleAssistant, Content: llm.Text("hello")},
		}}
	if got := llm.Changes(before, before.Clone()); len(got) != 0 {
		t.Errorf("unchanged request: %v", got)
	}
	after := before.Clone()
	after.Model, after.MaxTokens, after.ToolNames = "openai:b", 200, []string{"fs_read", "web_fetch"}
	after.Messages[0] = llm.Message{Role: llm.RoleSystem, Content: llm.Text("Be brief.")}
	after.Messages[2] = llm.Message{Role: llm.RoleAssistant, Content: llm.Text("hey")}
	after.Messages = append(after.Messages, llm.Message{Role: llm.RoleUser, Content: llm.Text("more")})
	got, _ := json.Marshal(llm.Changes(before, after))
	want := `{"max_tokens":{"after":200,"before":100},"messages":{"after_count":3,"before_count":2,"changed":[1]},` +
		`"model":{"after":"openai:b","before":"openai:a"},"system_prompt":{"after_len":9,"before_len":12},` +
		`"tool_names":{"added":["web_fetch"],"removed":["bash"]}}`
	if string(got) != want {
		t.Errorf("Changes\n got %s\nwant %s", got, want)
	}
	if s := after.SystemPrompt(); s != "Be brief." {
		t.Errorf("SystemPrompt %q", s)
	}
	if s := (llm.Request{Messages: after.Messages[1:]}).SystemPrompt(); s != "" {
		t.Errorf("SystemPrompt without a system message %q", s)
	}
}
