package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/bubbus/bub/pkg/llm"
)

// errTruncated is a stream that ended before message_stop.
var errTruncated = errors.New("stream ended before message_stop")

// consume reads the events of stream into one message with the SDK's
// accumulator, streaming text and thinking deltas to onDelta, and closes
// the stream. The stream must begin with message_start and end with
// message_stop; events after message_stop are not read.
//
// A tool_use block's input is the input_json_delta pieces as they came:
// the accumulator replaces input that is not JSON with {} (a call cut off
// by max_tokens would run with no arguments), where the agent must see
// the malformed arguments and fail the step.
func consume(stream *ssestream.Stream[asdk.MessageStreamEventUnion], onDelta func(llm.Delta)) (asdk.Message, error) {
	defer stream.Close()
	var (
		msg     asdk.Message
		started bool
		inputs  = map[int64]*strings.Builder{} // by block index
	)
	for stream.Next() {
		ev := stream.Current()
		if started == (ev.Type == "message_start") {
			return msg, fmt.Errorf("stream: unexpected %q event", ev.Type)
		}
		started = true
		if err := msg.Accumulate(ev); err != nil {
			return msg, fmt.Errorf("stream: %w", err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			b := inputs[ev.Index]
			if b == nil {
				b = new(strings.Builder)
				inputs[ev.Index] = b
			}
			b.WriteString(ev.Delta.PartialJSON)
		}
		switch {
		case ev.Type == "message_stop":
			for i, b := range inputs {
				if i >= 0 && i < int64(len(msg.Content)) && msg.Content[i].Type == "tool_use" && b.Len() > 0 {
					msg.Content[i].Input = json.RawMessage(b.String())
				}
			}
			return msg, nil
		case ev.Type != "content_block_delta" || onDelta == nil:
		case ev.Delta.Type == "text_delta" && ev.Delta.Text != "" && blockType(msg, ev.Index) == "text":
			onDelta(llm.Delta{Kind: llm.DeltaText, Text: ev.Delta.Text})
		case ev.Delta.Type == "thinking_delta" && ev.Delta.Thinking != "" && blockType(msg, ev.Index) == "thinking":
			onDelta(llm.Delta{Kind: llm.DeltaReasoning, Text: ev.Delta.Thinking})
		}
	}
	if err := stream.Err(); err != nil {
		return msg, err
	}
	return msg, errTruncated
}

// blockType is the type of the accumulated content block at index ("" for
// none). A delta is streamed only into a block of its own kind, the one
// the accumulator appends it to, so the deltas shown always add up to the
// response.
func blockType(msg asdk.Message, index int64) string {
	if index < 0 || index >= int64(len(msg.Content)) {
		return ""
	}
	return string(msg.Content[index].Type)
}

// response converts an accumulated message: its text blocks joined, its
// thinking blocks joined as the reasoning, its tool_use blocks as tool
// calls (arguments "{}" when the input is empty) and its usage.
func response(msg asdk.Message) llm.Response {
	var text, reasoning strings.Builder
	var resp llm.Response
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{
				ID: b.ID, Type: "function", Function: llm.FunctionCall{Name: b.Name, Arguments: args},
			})
		}
	}
	resp.Text, resp.Reasoning = text.String(), reasoning.String()
	resp.Usage = usageOf(msg.Usage)
	return resp
}

// usageOf maps Anthropic's usage into Bub's OpenAI-shaped one:
// prompt_tokens counts every input token, cached or not.
func usageOf(u asdk.Usage) *llm.Usage {
	prompt := int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens)
	return &llm.Usage{
		PromptTokens:     prompt,
		CompletionTokens: int(u.OutputTokens),
		TotalTokens:      prompt + int(u.OutputTokens),
		PromptTokensDetails: &llm.PromptTokensDetails{
			CachedTokens:     int(u.CacheReadInputTokens),
			CacheWriteTokens: int(u.CacheCreationInputTokens),
		},
	}
}
