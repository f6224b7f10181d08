package fakellm_test

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/openai"
)

// TestExampleScript plays testdata/example.json, the script shown in the
// package doc, through the real OpenAI-compatible provider.
func TestExampleScript(t *testing.T) {
	script, err := fakellm.LoadScript("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	_, base := fakellm.Start(t, script)
	p, err := openai.New(openai.WithBaseURL(base), openai.WithAPIKey("sk-test"), openai.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prompt      string
		want        llm.Response
		wantErrCode string // the provider's error code, or "stream" for a mid-stream error
	}{
		{prompt: "hi", want: llm.Response{Text: "Hello there"}},
		{prompt: "hi", want: llm.Response{Text: "42", Reasoning: "Let me think.", Usage: &llm.Usage{
			PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15, PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 8},
		}}},
		{prompt: "how is the weather?", want: llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "call_w", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			{ID: "call_2", Type: "function", Function: llm.FunctionCall{Name: "broken", Arguments: `{"not json`}},
		}}},
		{prompt: "hi", wantErrCode: "context_length_exceeded"},
		{prompt: "repeat after me", want: llm.Response{Text: "repeat after me"}},
		{prompt: "hi", wantErrCode: "stream"},
		{prompt: "hi", want: llm.Response{Text: "verbatim"}},
		{prompt: "ping", want: llm.Response{Text: "pong"}},
		{prompt: "ping", want: llm.Response{Text: "pong"}},
		{prompt: "the script ran out", want: llm.Response{Text: "the script ran out"}},
	}
	for i, tt := range tests {
		got, err := p.Complete(t.Context(), llm.Call{Model: "fake", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(tt.prompt)}}}, nil)
		if tt.wantErrCode != "" {
			var be *bub.Error
			if !errors.As(err, &be) {
				t.Fatalf("step %d: err = %v, want a provider error", i, err)
			}
			if code := be.Details["code"]; tt.wantErrCode != "stream" && code != tt.wantErrCode || tt.wantErrCode == "stream" && !strings.Contains(be.Message, "upstream disconnected") {
				t.Errorf("step %d: err = %v (%v)", i, be, be.Details)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if tt.want.Usage == nil {
			got.Usage = nil // computed word counts; pinned elsewhere
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("step %d (%q):\n got %+v\nwant %+v", i, tt.prompt, got, tt.want)
		}
	}
}

// TestDocShowsExampleScript keeps the package doc and testdata/example.json
// identical.
func TestDocShowsExampleScript(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	inBlock := false
	for line := range strings.SplitSeq(string(doc), "\n") {
		code, ok := strings.CutPrefix(line, "//\t")
		switch {
		case ok && (inBlock || code == "{"):
			inBlock = true
			shown = append(shown, code)
		case inBlock:
			inBlock = false
		}
		if !inBlock && len(shown) > 0 {
			break
		}
	}
	if got, want := strings.Join(shown, "\n"), strings.TrimSpace(string(example)); got != want {
		t.Fatalf("doc.go shows\n%s\nbut testdata/example.json is\n%s", got, want)
	}
}
