package events

import (
	"github.com/bubbus/bub/pkg/llm"
)

// The framework events (Bub's framework.events) and the events this
// runtime adds: interceptor decisions, recorded tape events and turn
// errors. Bub names the framework events but not their fields; the
// fields here are inferred: the session (in [Meta]), what the event is
// about and its status. Framework events may be emitted outside a run, so
// their Meta.State and Meta.RunID may be empty.

// Statuses of the framework events.
const (
	StatusQueued   = "queued"
	StatusStarted  = "started"
	StatusFinished = "finished"
	StatusFailed   = "failed"
)

// CommandChanged reports the progress of a direct (comma) command.
type CommandChanged struct {
	Meta
	// ID identifies the command invocation (the inbound envelope id).
	ID string
	// Command is the raw command line without the leading comma.
	Command string
	// Status is StatusStarted, StatusFinished or StatusFailed.
	Status string
}

// WorkChanged reports the progress of a channel's work on one inbound
// message (e.g. for a typing indicator).
type WorkChanged struct {
	Meta
	// ID identifies the work item (the inbound envelope id).
	ID string
	// Channel is the channel the work belongs to.
	Channel string
	// Status is StatusQueued, StatusStarted, StatusFinished or
	// StatusFailed.
	Status string
}

// PromptChanged reports a user prompt a channel accepted.
type PromptChanged struct {
	Meta
	// ID identifies the prompt (the inbound envelope id).
	ID string
	// Channel is the channel the prompt came from.
	Channel string
	// Prompt is the prompt: text or content parts.
	Prompt llm.Content
	// Status is StatusQueued, StatusStarted, StatusFinished or
	// StatusFailed.
	Status string
}

// HookDecision records that a hook implementation changed or stopped a
// call (docs/hooks.md, "Decisions are events"), or was skipped because it
// failed.
type HookDecision struct {
	Meta
	// Plugin names the plugin that decided.
	Plugin string
	// Remote is true for an interceptor service reached over NATS.
	Remote bool
	// Hook is the hook name, e.g. "before_tool_call".
	Hook string
	// Action is what the plugin decided, in the hooks' vocabulary:
	// "modify", "finish", "proceed", "replace", "deny", "abort" for a call
	// that failed because a fail-closed implementation could not decide,
	// or "skipped" for a failed implementation that was logged and skipped.
	Action string
	// Detail says more, e.g. {"tool": "bash", "message": "…"}.
	Detail map[string]any
	// DurationMS is how long the implementation took.
	DurationMS int64
	// Err is the failure of a skipped implementation.
	Err error
}

// TapeEventRecorded asks for a named event entry on the session's tape
// (Bub's tape.append_event): the worker's [TapeWriter] emits it, and the
// recorder appends it with the rest of the run.
type TapeEventRecorded struct {
	Meta
	// Name is the event name, e.g. "order.reviewed".
	Name string
	// Data is the event's data.
	Data map[string]any
}

// TurnError reports a failed turn stage (Bub's on_error hook input).
type TurnError struct {
	Meta
	// Stage is the failing stage, e.g. "turn" or "run_model".
	Stage string
	// EnvelopeID is the inbound envelope of the turn, if any.
	EnvelopeID string
	// Err is the error.
	Err error
}
