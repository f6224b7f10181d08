package fakeanthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Script is what a [Server] answers: its steps in order, then echo.
type Script struct {
	// APIKey, when set, must arrive as "x-api-key: <key>" or
	// "Authorization: Bearer <key>"; other requests get 401
	// authentication_error.
	APIKey string
	// Steps answer requests in order.
	Steps []Step
}

// Step is one scripted answer: Error, or content blocks.
type Step struct {
	// Thinking is a thinking block, streamed first (with a signature).
	Thinking string
	// Text is a text block.
	Text string
	// ToolCalls are tool_use blocks, after the text.
	ToolCalls []ToolCall
	// Chunks is how many deltas each block is split into (default 3).
	Chunks int
	// Usage replaces the computed usage (rough word counts).
	Usage *Usage
	// StopReason defaults to "tool_use" with tool calls, else "end_turn".
	StopReason string

	// Error answers with an HTTP error instead of a message.
	Error *Error
	// StreamError ends a stream with an "error" event after the content,
	// instead of message_delta and message_stop.
	StreamError *Error
}

// ToolCall is one scripted tool_use block.
type ToolCall struct {
	// ID defaults to "toolu_<n>" (n counts the server's tool calls).
	ID   string
	Name string
	// Input is the JSON input object, sent as input_json_delta pieces;
	// default {}.
	Input string
}

// Usage is a scripted usage: input_tokens and the cache counts go in
// message_start, output_tokens in message_delta.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// Error is an Anthropic error: Type is the error type
// ("rate_limit_error", ...); Status defaults to the type's status.
type Error struct {
	Status  int
	Type    string
	Message string
}

// statusOfType is the HTTP status Anthropic answers for each error type.
var statusOfType = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"overloaded_error":      529,
}

// Request is one request the server received.
type Request struct {
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Fields is the decoded body (nil when it was not a JSON object).
	Fields map[string]any
}

// Server is a fake Anthropic Messages API (see the package doc). It is an
// [http.Handler]; it is safe for concurrent use.
type Server struct {
	apiKey string

	// mu guards the fields below.
	mu        sync.Mutex
	steps     []Step
	requests  []Request
	messages  int
	toolCalls int
}

// New returns a server that answers from script.
func New(script Script) *Server {
	return &Server{apiKey: script.APIKey, steps: append([]Step(nil), script.Steps...)}
}

// Start serves script on a random 127.0.0.1 port until the test ends and
// returns the server and its base URL ("http://127.0.0.1:<port>", the
// SDK's base without /v1).
func Start(t testing.TB, script Script) (*Server, string) {
	t.Helper()
	s := New(script)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// Requests returns the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ServeHTTP answers POST /v1/messages.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeError(w, &Error{Type: "not_found_error", Message: fmt.Sprintf("%s %s not found", r.Method, r.URL.Path)})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, &Error{Type: "invalid_request_error", Message: "reading the body: " + err.Error()})
		return
	}
	req := Request{Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &req.Fields)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	if s.apiKey != "" && r.Header.Get("X-Api-Key") != s.apiKey && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, &Error{Type: "authentication_error", Message: "invalid x-api-key"})
		return
	}
	var msg messagesBody
	if err := json.Unmarshal(body, &msg); err != nil {
		writeError(w, &Error{Type: "invalid_request_error", Message: "body is not a messages request: " + err.Error()})
		return
	}
	if err := msg.validate(); err != nil {
		writeError(w, &Error{Type: "invalid_request_error", Message: err.Error()})
		return
	}
	step, id := s.next(msg)
	if step.Error != nil {
		writeError(w, step.Error)
		return
	}
	a := s.answer(step, msg, id)
	if msg.Stream {
		a.stream(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a.message())
}

// next takes the next step (an echo when there is none) and numbers the
// message.
func (s *Server) next(msg messagesBody) (Step, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages++
	id := fmt.Sprintf("msg_%d", s.messages)
	if len(s.steps) == 0 {
		return Step{Text: msg.lastUserText()}, id
	}
	step := s.steps[0]
	s.steps = s.steps[1:]
	return step, id
}

// writeError sends Anthropic's error body with the status of e.
func writeError(w http.ResponseWriter, e *Error) {
	status := e.Status
	if status == 0 {
		status = statusOfType[e.Type]
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody(e))
}

func errorBody(e *Error) map[string]any {
	return map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": e.Type, "message": e.Message},
		"request_id": "req_fake",
	}
}

// messagesBody is the part of a request body the server checks.
type messagesBody struct {
	Model     string    `json:"model"`
	MaxTokens *int      `json:"max_tokens"`
	Stream    bool      `json:"stream"`
	Messages  []message `json:"messages"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is a content block of a request message.
type block struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	ID        string `json:"id"`
	ToolUseID string `json:"tool_use_id"`
}

// blocks returns the content as blocks (a string is one text block).
func (m message) blocks() ([]block, error) {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []block{{Type: "text", Text: s}}, nil
	}
	var bs []block
	if err := json.Unmarshal(m.Content, &bs); err != nil {
		return nil, errors.New("content must be a string or a list of content blocks")
	}
	return bs, nil
}

// validate checks what the Messages API rejects (see the package doc).
func (b messagesBody) validate() error {
	switch {
	case b.Model == "":
		return errors.New("model: Field required")
	case b.MaxTokens == nil:
		return errors.New("max_tokens: Field required")
	case len(b.Messages) == 0:
		return errors.New("messages: at least one message is required")
	}
	var pending []string // tool_use ids the next message must answer
	for i, m := range b.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		blocks, err := m.blocks()
		if err != nil {
			return fmt.Errorf("messages.%d.content: %w", i, err)
		}
		var uses, results []string
		for j, bl := range blocks {
			switch {
			case bl.Type == "text" && bl.Text == "":
				return fmt.Errorf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
			case bl.Type == "tool_use":
				uses = append(uses, bl.ID)
			case bl.Type == "tool_result":
				results = append(results, bl.ToolUseID)
			}
		}
		for _, id := range results {
			if !slices.Contains(pending, id) {
				return fmt.Errorf("messages.%d.content: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message", i, id)
			}
		}
		for _, id := range pending {
			if !slices.Contains(results, id) {
				return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, id)
			}
		}
		pending = uses
	}
	if len(pending) > 0 {
		return fmt.Errorf("messages: `tool_use` ids were found without `tool_result` blocks immediately after: %s", strings.Join(pending, ", "))
	}
	return nil
}

// lastUserText returns the text blocks of the last user message.
func (b messagesBody) lastUserText() string {
	for i := len(b.Messages) - 1; i >= 0; i-- {
		if b.Messages[i].Role != "user" {
			continue
		}
		blocks, _ := b.Messages[i].blocks()
		var texts []string
		for _, bl := range blocks {
			if bl.Type == "text" {
				texts = append(texts, bl.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}
