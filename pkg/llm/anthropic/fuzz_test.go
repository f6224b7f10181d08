package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// FuzzStream feeds arbitrary bytes as a streamed response body through the
// SDK's SSE decoder and accumulator into consume and response, the exact
// path of a real call after the HTTP exchange. It must never panic, and a
// successful result must agree with the deltas it streamed.
func FuzzStream(f *testing.F) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"cache_read_input_tokens\":2}}}\n\n"
	stop := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, seed := range []string{
		start + "event: ping\ndata: {\"type\":\"ping\"}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n" +
			stop,
		start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
		start + start + stop,
		stop,
		start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"cut\"}}\n\n" + stop,
		"data: not json\n\n",
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
		stream := ssestream.NewStream[asdk.MessageStreamEventUnion](ssestream.NewDecoder(resp), nil)
		var text, reasoning strings.Builder
		msg, err := consume(stream, func(d llm.Delta) {
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
		got := response(msg)
		if got.Text != text.String() || got.Reasoning != reasoning.String() {
			t.Fatalf("response text %q / reasoning %q disagree with deltas %q / %q", got.Text, got.Reasoning, text.String(), reasoning.String())
		}
		for _, tc := range got.ToolCalls {
			if tc.Type != "function" || tc.Function.Arguments == "" {
				t.Fatalf("tool call without defaults: %+v", tc)
			}
		}
		if got.Usage == nil || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
			t.Fatalf("usage = %+v", got.Usage)
		}
	})
}

// FuzzParams converts arbitrary messages (as a tape would hold them, in
// JSON) into a Messages API request: it must never panic, a refusal must
// be an invalid_input *bub.Error, and an accepted request must encode.
func FuzzParams(f *testing.F) {
	for _, seed := range []string{
		`[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]`,
		`[{"role":"tool","tool_call_id":"x","content":"orphan"},{"role":"tool","content":""}]`,
		`[{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"k\":[1"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"r"}]}]`,
		`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,"}},{"type":"video_url"}]}]`,
		`[{"role":"robot","content":"?"}]`,
		`[]`,
	} {
		f.Add([]byte(seed), "high")
	}
	p, err := New()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte, effort string) {
		var messages []llm.Message
		if json.Unmarshal(raw, &messages) != nil {
			return
		}
		params, err := p.params(llm.Call{Model: "m", Messages: messages, MaxTokens: 4096, ReasoningEffort: effort,
			Tools: []llm.ToolSchema{{Name: "t", Parameters: map[string]any{"required": "not a list"}}}})
		if err != nil {
			var be *bub.Error
			if !errors.As(err, &be) || be.Kind != bub.KindInvalidInput {
				t.Fatalf("err = %v (%T), want invalid_input", err, err)
			}
			return
		}
		if _, err := json.Marshal(params); err != nil {
			t.Fatalf("encoding the request: %v", err)
		}
	})
}
