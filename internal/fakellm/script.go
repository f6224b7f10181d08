package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// Script is what a [Server] answers: its steps in order, then echo. The
// JSON form is the script file format described in the package doc.
type Script struct {
	// APIKey, when set, must arrive as "Authorization: Bearer <key>";
	// other requests get 401.
	APIKey string `json:"api_key,omitempty"`
	// Models are listed by GET /v1/models (default ["fake"]). Chat
	// requests may name any model.
	Models []string `json:"models,omitempty"`
	// Steps answer chat requests (see [Step]).
	Steps []Step `json:"steps,omitempty"`
}

// Step is one scripted answer. A request takes the first pending step
// whose Match is empty or a substring of the request's last user message;
// the step is consumed unless Repeat is set. With no matching step the
// server echoes.
//
// A step answers with Error, or with Raw chunks, or with content: Reasoning
// and Text (or Echo) and ToolCalls, in that order.
type Step struct {
	// Match selects requests whose last user message contains it.
	Match string `json:"match,omitempty"`
	// Repeat keeps the step for later requests.
	Repeat bool `json:"repeat,omitempty"`

	// Echo answers with the last user message's text.
	Echo bool `json:"echo,omitempty"`
	// Text is the answer text.
	Text string `json:"text,omitempty"`
	// Reasoning is streamed as "reasoning_content" deltas before the text.
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCalls are requested in this order (indices 0, 1, ...).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Chunks is how many deltas the reasoning, the text and each tool
	// call's arguments are split into (default 3).
	Chunks int `json:"chunks,omitempty"`
	// Usage overrides the computed usage (rough word counts).
	Usage *Usage `json:"usage,omitempty"`

	// Error answers with an HTTP error instead of a completion.
	Error *Error `json:"error,omitempty"`
	// StreamError ends a stream with an SSE error event carrying this
	// message (after the content, instead of [DONE]).
	StreamError string `json:"stream_error,omitempty"`
	// Raw chunks are streamed verbatim as "data: <chunk>" events, then
	// [DONE]; they need a streaming request.
	Raw []json.RawMessage `json:"raw_chunks,omitempty"`

	// Delay is waited before the first byte of the answer.
	Delay Duration `json:"delay,omitempty"`
	// ChunkDelay is waited between streamed chunks.
	ChunkDelay Duration `json:"chunk_delay,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	// ID defaults to "call_<n>" (n counts the server's tool calls).
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is a JSON object sent as its text, or a JSON string whose
	// content is sent as is (for malformed arguments); default {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Usage is a scripted token usage.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
}

// Error is a scripted HTTP error, sent as the OpenAI error body
// {"error": {"message", "type", "code"}}.
type Error struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
	Type    string `json:"type,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("250ms").
type Duration time.Duration

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// LoadScript reads and validates a script file. Unknown fields are errors,
// so a typo never silently changes a test.
func LoadScript(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("fakellm: reading script: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("fakellm: decoding script %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return Script{}, fmt.Errorf("fakellm: script %s: %w", path, err)
	}
	return s, nil
}

// Validate reports every invalid step at once.
func (s Script) Validate() error {
	var errs []error
	for i, st := range s.Steps {
		if err := st.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("steps[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Validate reports what makes the step ambiguous or impossible.
func (st Step) Validate() error {
	var errs []error
	hasContent := st.Echo || st.Text != "" || st.Reasoning != "" || len(st.ToolCalls) > 0
	switch {
	case st.Error != nil && (hasContent || len(st.Raw) > 0 || st.StreamError != ""):
		errs = append(errs, errors.New("error excludes content, raw_chunks and stream_error"))
	case len(st.Raw) > 0 && hasContent:
		errs = append(errs, errors.New("raw_chunks exclude echo, text, reasoning and tool_calls"))
	case st.Echo && st.Text != "":
		errs = append(errs, errors.New("echo and text exclude each other"))
	}
	if st.Error != nil && (st.Error.Status < 400 || st.Error.Status > 599) {
		errs = append(errs, fmt.Errorf("error.status %d is not an HTTP error status", st.Error.Status))
	}
	for i, tc := range st.ToolCalls {
		if tc.Name == "" {
			errs = append(errs, fmt.Errorf("tool_calls[%d]: name is required", i))
		}
		if _, err := argumentText(tc.Arguments); err != nil {
			errs = append(errs, fmt.Errorf("tool_calls[%d]: %w", i, err))
		}
	}
	for i, raw := range st.Raw {
		if !json.Valid(raw) {
			errs = append(errs, fmt.Errorf("raw_chunks[%d] is not JSON", i))
		}
	}
	if st.Chunks < 0 || st.Delay < 0 || st.ChunkDelay < 0 {
		errs = append(errs, errors.New("chunks, delay and chunk_delay must not be negative"))
	}
	return errors.Join(errs...)
}

// argumentText returns the wire text of scripted arguments.
func argumentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return "{}", nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return s, nil
	case raw[0] == '{':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return buf.String(), nil
	}
	return "", errors.New("arguments must be a JSON object or a string")
}
