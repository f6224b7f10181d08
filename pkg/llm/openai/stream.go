package openai

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/bubbus/bub/pkg/llm"
)

// reasoningKeys are the non-standard delta fields that carry reasoning
// text, in order of preference: vLLM, DeepSeek and llama.cpp use
// "reasoning_content", OpenRouter and Ollama "reasoning".
var reasoningKeys = []string{"reasoning_content", "reasoning"}

// consume reads every chunk of stream into a response and closes it.
func consume(stream *ssestream.Stream[oai.ChatCompletionChunk], onDelta func(llm.Delta)) (llm.Response, error) {
	defer stream.Close()
	acc := accumulator{onDelta: onDelta}
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return llm.Response{}, err
	}
	return acc.response(), nil
}

// accumulator merges streamed chunks by Bub's rules. Its zero value with
// onDelta set (or nil) is ready to use.
type accumulator struct {
	onDelta   func(llm.Delta)
	text      strings.Builder
	reasoning strings.Builder
	calls     map[int64]*partialCall
	usage     *llm.Usage
}

// partialCall is a tool call being assembled from deltas.
type partialCall struct {
	id, typ, name string
	args          strings.Builder
}

// add merges one chunk: usage from any chunk that has it; per choice,
// reasoning, text and tool-call deltas.
func (a *accumulator) add(chunk oai.ChatCompletionChunk) {
	if chunk.JSON.Usage.Valid() {
		a.usage = usageOf(chunk.Usage)
	}
	for _, choice := range chunk.Choices {
		delta := choice.Delta
		if r := reasoningOf(delta); r != "" {
			a.reasoning.WriteString(r)
			a.emit(llm.DeltaReasoning, r)
		}
		if delta.Content != "" {
			a.text.WriteString(delta.Content)
			a.emit(llm.DeltaText, delta.Content)
		}
		for _, tc := range delta.ToolCalls {
			a.mergeToolCall(tc)
		}
	}
}

func (a *accumulator) emit(kind, text string) {
	if a.onDelta != nil {
		a.onDelta(llm.Delta{Kind: kind, Text: text})
	}
}

// mergeToolCall merges a tool-call delta into the call of its index: id
// and type overwrite when present, the name is set by the first delta and
// a later different name is appended, arguments are concatenated.
func (a *accumulator) mergeToolCall(tc oai.ChatCompletionChunkChoiceDeltaToolCall) {
	if a.calls == nil {
		a.calls = map[int64]*partialCall{}
	}
	call, ok := a.calls[tc.Index]
	if !ok {
		call = &partialCall{}
		a.calls[tc.Index] = call
	}
	if tc.ID != "" {
		call.id = tc.ID
	}
	if tc.Type != "" {
		call.typ = tc.Type
	}
	if name := tc.Function.Name; name != "" && name != call.name {
		call.name += name
	}
	call.args.WriteString(tc.Function.Arguments)
}

// response returns the accumulated answer; tool calls are sorted by index
// with the defaults id "call_<index>", type "function", arguments "{}".
func (a *accumulator) response() llm.Response {
	resp := llm.Response{Text: a.text.String(), Reasoning: a.reasoning.String(), Usage: a.usage}
	for _, index := range slices.Sorted(maps.Keys(a.calls)) {
		call := a.calls[index]
		tc := llm.ToolCall{
			ID:       call.id,
			Type:     call.typ,
			Function: llm.FunctionCall{Name: call.name, Arguments: call.args.String()},
		}
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d", index)
		}
		if tc.Type == "" {
			tc.Type = "function"
		}
		if tc.Function.Arguments == "" {
			tc.Function.Arguments = "{}"
		}
		resp.ToolCalls = append(resp.ToolCalls, tc)
	}
	return resp
}

// reasoningOf returns the reasoning text of a delta, "" when it has none.
func reasoningOf(delta oai.ChatCompletionChunkChoiceDelta) string {
	for _, key := range reasoningKeys {
		// The SDK marks unknown fields invalid (untyped), so read the raw
		// JSON; null and non-strings are skipped.
		var s string
		if json.Unmarshal([]byte(delta.JSON.ExtraFields[key].Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

func usageOf(u oai.CompletionUsage) *llm.Usage {
	usage := &llm.Usage{
		PromptTokens:     int(u.PromptTokens),
		CompletionTokens: int(u.CompletionTokens),
		TotalTokens:      int(u.TotalTokens),
	}
	if u.JSON.PromptTokensDetails.Valid() {
		usage.PromptTokensDetails = &llm.PromptTokensDetails{
			CachedTokens:     int(u.PromptTokensDetails.CachedTokens),
			CacheWriteTokens: int(u.PromptTokensDetails.CacheWriteTokens),
		}
	}
	return usage
}
