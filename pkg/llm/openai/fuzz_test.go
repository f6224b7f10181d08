package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/bubbus/bub/pkg/llm"
)

// FuzzStream feeds arbitrary bytes as a streamed response body through the
// SDK's SSE decoder into consume, the exact path of a real call after the
// HTTP exchange. It must never panic, and a successful result must agree
// with the deltas it streamed.
func FuzzStream(f *testing.F) {
	for _, seed := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"r\",\"tool_calls\":[{\"index\":1,\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"x\\\"\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\ndata: [DONE]\n\n",
		"data: {\"error\":{\"message\":\"boom\"}}\n\n",
		"event: x\ndata: {\"choices\":null}\n: comment\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-9223372036854775808}]}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":7,\"reasoning\":[1]}}]}\n\ndata: not json\n\n",
		"data: [DONE",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"text/event-stream"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		stream := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(resp), nil)
		var text, reasoning strings.Builder
		got, err := consume(stream, func(d llm.Delta) {
			switch d.Kind {
			case llm.DeltaText:
				text.WriteString(d.Text)
			case llm.DeltaReasoning:
				reasoning.WriteString(d.Text)
			default:
				t.Fatalf("delta kind %q", d.Kind)
			}
		})
		if err != nil {
			return
		}
		if got.Text != text.String() || got.Reasoning != reasoning.String() {
			t.Fatalf("response text %q / reasoning %q disagree with deltas %q / %q", got.Text, got.Reasoning, text.String(), reasoning.String())
		}
		for _, tc := range got.ToolCalls {
			if tc.ID == "" || tc.Type == "" || tc.Function.Arguments == "" {
				t.Fatalf("tool call without defaults: %+v", tc)
			}
		}
	})
}

// FuzzToolCallArguments splits arbitrary arguments across three deltas of
// one tool call (decoded by the SDK from JSON, as on the wire) and checks
// the merge: arguments concatenated, the name set once, the defaults.
func FuzzToolCallArguments(f *testing.F) {
	f.Add(`{"path":"a.txt","content":"x"}`, uint(3), uint(9), int64(0), "fs_write")
	f.Add(`{"unterminated`, uint(0), uint(100), int64(7), "")
	f.Add("", uint(1), uint(2), int64(-1), "名前")
	f.Add("\x00\xff{\"é\":1}", uint(2), uint(1), int64(1<<40), "a\"b")
	f.Fuzz(func(t *testing.T, args string, cut1, cut2 uint, index int64, name string) {
		runes := []rune(strings.ToValidUTF8(args, "\uFFFD"))
		name = strings.ToValidUTF8(name, "\uFFFD")
		a, b := int(cut1%uint(len(runes)+1)), int(cut2%uint(len(runes)+1))
		if a > b {
			a, b = b, a
		}
		pieces := []string{string(runes[:a]), string(runes[a:b]), string(runes[b:])}
		var acc accumulator
		for i, piece := range pieces {
			fn := map[string]any{"arguments": piece}
			if i < 2 { // the same name twice must not double it
				fn["name"] = name
			}
			raw, err := json.Marshal(map[string]any{"choices": []any{map[string]any{
				"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": index, "function": fn}}},
			}}})
			if err != nil {
				t.Fatal(err)
			}
			var chunk oai.ChatCompletionChunk
			if err := json.Unmarshal(raw, &chunk); err != nil {
				t.Fatalf("SDK rejected %s: %v", raw, err)
			}
			acc.add(chunk)
		}
		calls := acc.response().ToolCalls
		want := llm.ToolCall{ID: fmt.Sprintf("call_%d", index), Type: "function", Function: llm.FunctionCall{Name: name, Arguments: string(runes)}}
		if want.Function.Arguments == "" {
			want.Function.Arguments = "{}"
		}
		if len(calls) != 1 || calls[0] != want {
			t.Fatalf("merged %+v, want [%+v]", calls, want)
		}
	})
}
