package remote

import (
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// benchRequest is the before_tool_call request of BenchmarkInterceptorHop.
func benchRequest() Request[BeforeToolCallInput] {
	call := tools.Call{RunID: "01JABCDEF0123456789ABCDEFG", Tool: "bash", CallID: "call_1",
		Arguments: map[string]any{"cmd": "go test ./...", "timeout_seconds": 30.0}}
	state := bub.NewState(map[string]any{bub.StateSessionID: "http:42", bub.StateModel: "openai:gpt-4o", "mode": "default"})
	return Request[BeforeToolCallInput]{Hook: hooks.HookBeforeToolCall, RunID: call.RunID, SessionID: "http:42",
		State: state.Public(), Input: BeforeToolCallInput{Call: call}}
}

// BenchmarkEncodeRequest measures the plugin's encoding of one request,
// the client's share of a hop's JSON work.
func BenchmarkEncodeRequest(b *testing.B) { benchEncode(b, benchRequest()) }

// BenchmarkDecodeRequest measures interceptor.Serve's decoding of one
// request, the server's share.
func BenchmarkDecodeRequest(b *testing.B) { benchDecode(b, benchRequest()) }

func benchEncode[In any](b *testing.B, r Request[In]) {
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = encodeRequest(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func benchDecode[In any](b *testing.B, r Request[In]) {
	data, err := encodeRequest(nil, &r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var got Request[In]
		if err := got.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

// benchLLMRequest is an after_llm_call request whose model context is 20
// messages (a system prompt, user and assistant turns, tool calls and
// their results).
func benchLLMRequest() Request[AfterLLMCallInput] {
	msgs := []llm.Message{{Role: "system", Content: llm.Text(strings.Repeat("You are Bub, a helpful agent. ", 40))}}
	for i := range 19 {
		switch i % 3 {
		case 0:
			msgs = append(msgs, llm.Message{Role: "user", Content: llm.Text("please run the tests and tell me what failed")})
		case 1:
			msgs = append(msgs, llm.Message{Role: "assistant", Content: llm.Text(""), ToolCalls: []llm.ToolCall{{ID: "call_1", Type: "function",
				Function: llm.FunctionCall{Name: "bash", Arguments: `{"cmd":"go test ./..."}`}}}})
		default:
			msgs = append(msgs, llm.Message{Role: "tool", ToolCallID: "call_1", Content: llm.Text("ok  \tgithub.com/bubbus/bub/pkg/llm\t0.012s\nFAIL\tgithub.com/bubbus/bub/pkg/tape")})
		}
	}
	req := llm.Request{RunID: "01JABCDEF0123456789ABCDEFG", Model: "openai:gpt-4o", Messages: msgs, ToolNames: []string{"bash", "fs.read", "fs.write", "web.fetch"}}
	state := bub.NewState(map[string]any{bub.StateSessionID: "http:42", bub.StateModel: "openai:gpt-4o"})
	return Request[AfterLLMCallInput]{Hook: hooks.HookAfterLLMCall, RunID: req.RunID, SessionID: "http:42", State: state.Public(),
		Input: AfterLLMCallInput{Request: req, Result: LLMResult{Result: llm.Result{RunID: req.RunID, Text: "two packages failed",
			Usage: &llm.Usage{PromptTokens: 1200, CompletionTokens: 40, TotalTokens: 1240}, DurationMS: 812}}}}
}

// BenchmarkEncodeLLMRequest measures the plugin's encoding of
// benchLLMRequest.
func BenchmarkEncodeLLMRequest(b *testing.B) { benchEncode(b, benchLLMRequest()) }

// BenchmarkDecodeLLMRequest measures an interceptor's decoding of
// benchLLMRequest.
func BenchmarkDecodeLLMRequest(b *testing.B) { benchDecode(b, benchLLMRequest()) }
