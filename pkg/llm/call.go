package llm

import (
	"context"
	"slices"
)

// Request is what before_llm_call hooks see and may replace (Bub's
// LlmCallRequest). ToolNames is observational only. MaxTokens 0 means the
// provider default.
type Request struct {
	RunID     string    `json:"run_id"`
	Model     string    `json:"model"`
	Messages  []Message `json:"messages"`
	ToolNames []string  `json:"tool_names"`
	MaxTokens int       `json:"max_tokens,omitempty"`
}

// Clone returns a copy whose slices may be modified without touching r.
func (r Request) Clone() Request {
	r.Messages = slices.Clone(r.Messages)
	r.ToolNames = slices.Clone(r.ToolNames) // an empty list (all tools withdrawn) stays empty
	return r
}

// Result is the outcome of one provider call that after_llm_call hooks see
// (Bub's LlmCallResult). Err is the original error of a failed call.
type Result struct {
	RunID      string     `json:"run_id"`
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	Usage      *Usage     `json:"usage,omitempty"`
	Err        error      `json:"-"`
	DurationMS int64      `json:"duration_ms"`
}

// Decision is a before_llm_call decision: finish the call with Text
// without calling the provider (Bub's LlmCallDecision.finish).
type Decision struct {
	Text string `json:"text"`
}

// Finish returns a decision that skips the provider and answers text.
func Finish(text string) *Decision { return &Decision{Text: text} }

// Call is what a [Provider] receives: the model id without the provider
// prefix, the messages, the tool schemas and limits.
type Call struct {
	Model           string
	Messages        []Message
	Tools           []ToolSchema
	MaxTokens       int
	ReasoningEffort string
}

// Delta is one streamed piece of a response.
type Delta struct {
	Kind string // "text" or "reasoning"
	Text string
}

// Response is a provider's accumulated answer.
type Response struct {
	Text      string
	Reasoning string
	ToolCalls []ToolCall
	Usage     *Usage
}

// Provider calls one model back-end. Complete streams deltas to onDelta (it
// may be nil) as they arrive and returns the accumulated response. A
// cancelled ctx must return ctx's error.
type Provider interface {
	Complete(ctx context.Context, call Call, onDelta func(Delta)) (Response, error)
}
