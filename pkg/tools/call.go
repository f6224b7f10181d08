package tools

import "maps"

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
)

// Decision is a before_tool_call decision (Bub's ToolCallDecision).
// Proceed with non-nil Arguments replaces the call's arguments and the
// chain continues; Replace and Deny stop the chain.
type Decision struct {
	Action    Action         `json:"action"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Result    any            `json:"result,omitempty"`
	Message   string         `json:"message,omitempty"`
}

// Proceed lets the call run, with args replacing its arguments when non-nil.
func Proceed(args map[string]any) *Decision {
	return &Decision{Action: ActionProceed, Arguments: args}
}

// Replace skips the tool and uses result as its result.
func Replace(result any) *Decision { return &Decision{Action: ActionReplace, Result: result} }

// Deny skips the tool and produces a tool error with message.
func Deny(message string) *Decision { return &Decision{Action: ActionDeny, Message: message} }

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
