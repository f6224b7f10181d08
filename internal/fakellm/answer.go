package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/bubbus/bub/pkg/llm"
)

// defaultChunks is how many deltas a text is split into by default.
const defaultChunks = 3

// answer is a resolved content step.
type answer struct {
	id, model       string
	text, reasoning string
	calls           []llm.ToolCall
	usage           Usage
	pieces          int
}

func (a answer) finishReason() string {
	if len(a.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (a answer) usageJSON() map[string]any {
	return map[string]any{
		"prompt_tokens":         a.usage.PromptTokens,
		"completion_tokens":     a.usage.CompletionTokens,
		"total_tokens":          a.usage.TotalTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": a.usage.CachedTokens},
	}
}

// completion is the stream=false body.
func (a answer) completion() map[string]any {
	msg := map[string]any{"role": llm.RoleAssistant, "content": a.text}
	if a.reasoning != "" {
		msg["reasoning_content"] = a.reasoning
	}
	if len(a.calls) > 0 {
		msg["tool_calls"] = a.calls
	}
	return map[string]any{
		"id":      a.id,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   a.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.finishReason()}},
		"usage":   a.usageJSON(),
	}
}

// chunks is the stream=true body as chat.completion.chunk objects: the
// reasoning and text pieces (the first chunk also carries the role), each tool call's header then its
// argument pieces, the finish reason, and the usage chunk when asked for.
func (a answer) chunks(includeUsage bool) []json.RawMessage {
	var out []json.RawMessage
	add := func(delta map[string]any, finish any) {
		if len(out) == 0 {
			delta["role"] = llm.RoleAssistant
		}
		out = append(out, a.chunk([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}, nil))
	}
	for _, piece := range split(a.reasoning, a.pieces) {
		add(map[string]any{"reasoning_content": piece}, nil)
	}
	for _, piece := range split(a.text, a.pieces) {
		add(map[string]any{"content": piece}, nil)
	}
	for i, c := range a.calls {
		add(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": c.Type,
			"function": map[string]any{"name": c.Function.Name, "arguments": ""},
		}}}, nil)
		for _, piece := range split(c.Function.Arguments, a.pieces) {
			add(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece},
			}}}, nil)
		}
	}
	add(map[string]any{}, a.finishReason())
	if includeUsage {
		out = append(out, a.chunk([]any{}, a.usageJSON()))
	}
	return out
}

func (a answer) chunk(choices []any, usage map[string]any) json.RawMessage {
	b, _ := json.Marshal(map[string]any{ // maps of JSON values always encode
		"id":      a.id,
		"object":  "chat.completion.chunk",
		"created": time.Now().Unix(),
		"model":   a.model,
		"choices": choices,
		"usage":   usage,
	})
	return b
}

// split cuts s into n pieces of about equal rune counts (fewer when s
// has fewer runes).
func split(s string, n int) []string {
	runes := []rune(s)
	n = min(n, len(runes))
	pieces := make([]string, n)
	for i := range n {
		pieces[i] = string(runes[i*len(runes)/n : (i+1)*len(runes)/n])
	}
	return pieces
}

// streamSSE writes chunks as server-sent events, flushing each, waiting
// gap between them, and ends with [DONE] or, when streamErr is set, an
// error event. It stops when ctx is done.
func streamSSE(ctx context.Context, w http.ResponseWriter, chunks []json.RawMessage, gap time.Duration, streamErr string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(data []byte) {
		var compact bytes.Buffer
		if json.Compact(&compact, data) == nil { // an event's data is one line
			data = compact.Bytes()
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	for i, c := range chunks {
		if i > 0 && !wait(ctx, gap) {
			return
		}
		send(c)
	}
	if streamErr != "" {
		b, _ := json.Marshal(map[string]any{"error": errorObject(streamErr, "server_error", "")})
		send(b)
		return
	}
	send([]byte("[DONE]"))
}
