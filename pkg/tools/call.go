package tools

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// Call is one tool call as before_tool_call / after_tool_call hooks see it
// (Bub's ToolCall). Tool is the model-facing name (e.g. "fs_read").
type Call struct {
	RunID     string         `json:"run_id"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	// CallID is the model's tool-call id, empty for direct commands.
	CallID string `json:"call_id,omitempty"`
}

// WithArguments returns a copy of c whose arguments are a copy of args.
func (c Call) WithArguments(args map[string]any) Call {
	c.Arguments = maps.Clone(args)
	if c.Arguments == nil {
		c.Arguments = map[string]any{}
	}
	return c
}

// Action is what a before_tool_call [Decision] asks for.
type Action string

// The decision actions.
const (
	ActionProceed Action = "proceed"
	ActionReplace Action = "replace"
	ActionDeny    Action = "deny"
	// ActionAsk parks the call until a person approves or denies it, or
	// its timeout passes and its default applies (see [Ask]).
	ActionAsk Action = "ask"
)

// Decision is a before_tool_call decision (Bub's ToolCallDecision).
// Proceed with non-nil Arguments replaces the call's arguments and the
// chain continues; Replace, Deny and Ask stop the chain.
type Decision struct {
	Action    Action         `json:"action"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Result    any            `json:"result,omitempty"`
	// Message is a deny's tool error, or an ask's reason (shown to the
	// person asked).
	Message string `json:"message,omitempty"`
	// TimeoutMS is how long an ask waits for an answer, in milliseconds.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Default is what an ask does when nobody answered in time:
	// ActionProceed or ActionDeny.
	Default Action `json:"default,omitempty"`
}

// Proceed lets the call run, with args replacing its arguments when non-nil.
func Proceed(args map[string]any) *Decision {
	return &Decision{Action: ActionProceed, Arguments: args}
}

// Replace skips the tool and uses result as its result.
func Replace(result any) *Decision { return &Decision{Action: ActionReplace, Result: result} }

// Deny skips the tool and produces a tool error with message.
func Deny(message string) *Decision { return &Decision{Action: ActionDeny, Message: message} }

// Ask parks the call until a person approves it (the tool runs) or denies
// it (a tool error with their reason), for at most timeout; then def
// applies — ActionProceed or ActionDeny, usually deny — and is recorded
// as a timeout, not as a person's answer. How the question reaches a
// person and where the parked call waits is the runtime's (see
// docs/hooks.md, "Approvals").
func Ask(reason string, timeout time.Duration, def Action) *Decision {
	return &Decision{Action: ActionAsk, Message: reason, TimeoutMS: timeout.Milliseconds(), Default: def}
}

// ErrBadAsk is why an ask decision is invalid: [Decision.ValidAsk] wraps
// it.
var ErrBadAsk = errors.New("invalid ask decision")

// ValidAsk reports what is wrong with an ask decision: a timeout that is
// not positive, or a default that is neither proceed nor deny.
func (d *Decision) ValidAsk() error {
	if d.TimeoutMS <= 0 {
		return fmt.Errorf("%w: timeout_ms must be positive, got %d", ErrBadAsk, d.TimeoutMS)
	}
	if d.Default != ActionProceed && d.Default != ActionDeny {
		return fmt.Errorf("%w: default %q: want proceed or deny", ErrBadAsk, d.Default)
	}
	return nil
}

// Result is the outcome of one tool call (Bub's ToolCallResult). It is
// mutable: after_tool_call hooks may assign Result, and every later hook
// and the model see the new value. Err is a *bub.Error for tool failures.
type Result struct {
	RunID      string         `json:"run_id"`
	Tool       string         `json:"tool"`
	Arguments  map[string]any `json:"arguments"`
	Result     any            `json:"result"`
	Err        error          `json:"-"`
	DurationMS int64          `json:"duration_ms"`
}
