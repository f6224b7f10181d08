package fakeanthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// answer is a step resolved into the message the server sends.
type answer struct {
	id, model   string
	blocks      []answerBlock
	usage       Usage
	stopReason  string
	chunks      int
	streamError *Error
}

// answerBlock is one content block of an answer.
type answerBlock struct {
	typ   string // thinking, text or tool_use
	text  string // the thinking, the text or the input JSON
	id    string
	name  string
	input string
}

// answer resolves step for the request msg.
func (s *Server) answer(step Step, msg messagesBody, id string) answer {
	a := answer{id: id, model: msg.Model, chunks: step.Chunks, stopReason: step.StopReason, streamError: step.StreamError}
	if a.chunks <= 0 {
		a.chunks = 3
	}
	if step.Thinking != "" {
		a.blocks = append(a.blocks, answerBlock{typ: "thinking", text: step.Thinking})
	}
	if step.Text != "" {
		a.blocks = append(a.blocks, answerBlock{typ: "text", text: step.Text})
	}
	for _, tc := range step.ToolCalls {
		if tc.ID == "" {
			s.mu.Lock()
			s.toolCalls++
			tc.ID = fmt.Sprintf("toolu_%d", s.toolCalls)
			s.mu.Unlock()
		}
		input := tc.Input
		if input == "" {
			input = "{}"
		}
		a.blocks = append(a.blocks, answerBlock{typ: "tool_use", id: tc.ID, name: tc.Name, input: input})
	}
	if a.stopReason == "" {
		a.stopReason = "end_turn"
		if len(step.ToolCalls) > 0 {
			a.stopReason = "tool_use"
		}
	}
	if step.Usage != nil {
		a.usage = *step.Usage
	} else {
		var out int
		for _, b := range a.blocks {
			out += len(strings.Fields(b.text + " " + b.input))
		}
		a.usage = Usage{InputTokens: len(strings.Fields(msg.lastUserText())), OutputTokens: out}
	}
	return a
}

// signature is the signature of every thinking block.
const signature = "sig-fake"

// wire returns the complete form of a block.
func (b answerBlock) wire() map[string]any {
	switch b.typ {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": b.text, "signature": signature}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": json.RawMessage(b.input)}
	}
	return map[string]any{"type": "text", "text": b.text}
}

// message is the non-streaming answer.
func (a answer) message() map[string]any {
	content := make([]any, len(a.blocks))
	for i, b := range a.blocks {
		content[i] = b.wire()
	}
	m := a.header(a.usage)
	m["content"] = content
	m["stop_reason"] = a.stopReason
	return m
}

// header is the message object of message_start (empty content, no stop
// reason yet).
func (a answer) header(usage Usage) map[string]any {
	return map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": a.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}
}

// stream sends the answer as Anthropic's server-sent events.
func (a answer) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := a.usage
	start.OutputTokens = 1
	send("message_start", map[string]any{"type": "message_start", "message": a.header(start)})
	send("ping", map[string]any{"type": "ping"})
	for i, b := range a.blocks {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.startForm()})
		for _, delta := range b.deltas(a.chunks) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if a.streamError != nil {
		send("error", errorBody(a.streamError))
		return
	}
	send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": a.stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.usage.OutputTokens},
	})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// startForm is the block as content_block_start carries it: empty text,
// thinking and signature, and an empty input.
func (b answerBlock) startForm() map[string]any {
	switch b.typ {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}
	}
	return map[string]any{"type": "text", "text": ""}
}

// deltas splits the block into n content_block_delta deltas; a thinking
// block ends with its signature_delta, and a tool_use block's pieces
// follow an empty input_json_delta, as Anthropic sends them.
func (b answerBlock) deltas(n int) []map[string]any {
	var out []map[string]any
	switch b.typ {
	case "thinking":
		for _, p := range split(b.text, n) {
			out = append(out, map[string]any{"type": "thinking_delta", "thinking": p})
		}
		out = append(out, map[string]any{"type": "signature_delta", "signature": signature})
	case "tool_use":
		out = append(out, map[string]any{"type": "input_json_delta", "partial_json": ""})
		for _, p := range split(b.input, n) {
			out = append(out, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
	default:
		for _, p := range split(b.text, n) {
			out = append(out, map[string]any{"type": "text_delta", "text": p})
		}
	}
	return out
}

// split cuts s into at most n non-empty pieces of about equal length,
// never inside a UTF-8 sequence.
func split(s string, n int) []string {
	runes := []rune(s)
	if n > len(runes) {
		n = len(runes)
	}
	var out []string
	for i := range n {
		out = append(out, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return out
}
