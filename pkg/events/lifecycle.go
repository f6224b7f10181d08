package events

import (
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// The lifecycle events of an agent run, in the order of docs/events/README.md
// ("Inside a worker: the run's event bus"). Each embeds
// [Meta] (turn state, run id, session id); the fields a handler may change
// are said so. The agent emits them with [Emit] and reads the changed
// fields back from the returned event.

// RunStarted is emitted when a model run begins. Handlers observe it.
type RunStarted struct {
	Meta
	// Prompt is the run's prompt: text or content parts.
	Prompt llm.Content
	// Model is the "provider:model" the run uses.
	Model string
	// Metadata holds further run facts: the inbound delivery the run
	// answers and the tools and skills it may use.
	Metadata RunMetadata
}

// RunMetadata is what a run records about itself beyond its prompt and
// model (the metadata object of run.started).
//
// Its JSON keys are in sorted order, as they were when it was a map.
type RunMetadata struct {
	// AllowedSkills is the turn state's allowed_skills, nil when the state
	// has none (Bub's loop.start tape event records it).
	AllowedSkills any `json:"allowed_skills,omitempty"`
	// AllowedTools limits the tools offered to the model, nil for all
	// (recorded like AllowedSkills).
	AllowedTools []string `json:"allowed_tools"`
	// Answers is the inbound delivery the run answers; zero for a run
	// that answers none (a subagent's, a local one).
	Answers
	// Resumes is the id of the interrupted run this one continues (a
	// worker resumed the turn after the run's worker died; see
	// docs/durable.md): its events open this run, and the recorder drops
	// the interrupted run's own.
	Resumes string `json:"resumes,omitempty"`
}

// Answers names the inbound delivery a run answers: the recorder moves
// the session's inbound watermark to InboundSeq when it commits the run
// (read-your-writes) and tells reruns of EnvelopeID apart by Delivery.
type Answers struct {
	// Delivery counts the envelope's deliveries (1 = first).
	Delivery uint64 `json:"delivery,omitempty"`
	// EnvelopeID is the inbound envelope's id.
	EnvelopeID string `json:"envelope_id,omitempty"`
	// InboundSeq is the envelope's inbound stream sequence.
	InboundSeq uint64 `json:"inbound_seq,omitempty"`
}

// Run statuses of [RunFinished].
const (
	RunOK        = "ok"
	RunError     = "error"
	RunCancelled = "cancelled"
)

// RunFinished is emitted when the run's stream closes. Handlers observe
// it.
type RunFinished struct {
	Meta
	// Status is RunOK, RunError or RunCancelled.
	Status string
	// Steps is the number of steps the run took.
	Steps int
	// DurationMS is the run's wall time in milliseconds.
	DurationMS int64
	// Err is the run's error, nil when it succeeded.
	Err error
}

// StepStarted is emitted when a model step begins. Handlers observe it.
type StepStarted struct {
	Meta
	// Step counts the run's steps from 1.
	Step int
	// Prompt is the step's prompt (Bub's loop.step.start records it). This
	// field is inferred: Bub names only the step.
	Prompt llm.Content
}

// Step statuses of [StepFinished] (Bub's loop.step statuses).
const (
	StepOK          = "ok"
	StepContinue    = "continue"
	StepError       = "error"
	StepAutoHandoff = "auto_handoff"
)

// StepFinished is emitted when a model step ends.
type StepFinished struct {
	Meta
	// Step counts the run's steps from 1.
	Step int
	// Status is StepOK, StepContinue, StepError or StepAutoHandoff.
	Status string
	// Err is the step's error for StepError and StepAutoHandoff.
	Err error
	// ElapsedMS is the step's wall time in milliseconds.
	ElapsedMS int64
	// NextPrompt is the user message of the next step. The agent fills it
	// from the continue_prompt hook; when Status is StepContinue a handler
	// may set it, and the agent uses the value Emit returns. It is ignored
	// for every other status.
	NextPrompt string
}

// MessagesPending is emitted while a step builds its model request
// (AtStepEnd false), and at the end of a step that called no tool
// (AtStepEnd true). Handlers append user messages, which go before the
// next prompt; messages appended at step end make the run continue. The
// steering inbox is drained here.
type MessagesPending struct {
	Meta
	// Step counts the run's steps from 1.
	Step int
	// AtStepEnd tells the step-end emission from the request-building one.
	AtStepEnd bool
	// Messages are the pending user messages; handlers append to it, for
	// example with AppendUser.
	Messages []llm.Message
}

// AppendUser appends a user message with content c.
func (e *MessagesPending) AppendUser(c llm.Content) {
	e.Messages = append(e.Messages, llm.Message{Role: llm.RoleUser, Content: c})
}

// LLMCallStarted is emitted before the provider is called. A handler may
// replace Request (the agent calls the provider with the returned one), or
// set Decision to llm.Finish(text): the provider and the later handlers
// are skipped, and the skipped call emits no [LLMCallFinished].
type LLMCallStarted struct {
	Meta
	// Request is the request the provider will get.
	Request llm.Request
	// Decision, when set, finishes the call without the provider.
	Decision *llm.Decision
}

// Stopped reports whether a handler set a decision.
func (e *LLMCallStarted) Stopped() bool { return e.Decision != nil }

// LLMCallFinished is emitted when a provider call completed or failed; not
// when it was cancelled or its consumer closed the stream. Handlers
// observe the accumulated result.
type LLMCallFinished struct {
	Meta
	// Request is the request the provider got.
	Request llm.Request
	// Result is the accumulated outcome; Result.Err is set on failure.
	Result llm.Result
}

// ToolCallStarted is emitted before a tool runs. A handler may replace
// Call (e.g. Call = Call.WithArguments(args)) and the tool runs with the
// returned one, or set Decision to tools.Deny(msg) (the tool is skipped
// and a tool error produced) or tools.Replace(result) (the tool is skipped
// and result used). Deny and replace stop the later handlers; the
// executor still emits [ToolCallFinished]. A proceed decision does not
// stop: the executor treats it as nil, after applying its Arguments when
// they are set, as the before_tool_call adapter does.
type ToolCallStarted struct {
	Meta
	// Call is the call the tool will get.
	Call tools.Call
	// Decision, when deny or replace, skips the tool.
	Decision *tools.Decision
}

// Stopped reports whether a handler set a deny or replace decision.
func (e *ToolCallStarted) Stopped() bool {
	return e.Decision != nil && e.Decision.Action != tools.ActionProceed
}

// ToolCallFinished is emitted when a tool succeeded, failed, was denied or
// was replaced. Result is shared with the executor: assigning
// Result.Result changes what later handlers and the model see.
type ToolCallFinished struct {
	Meta
	// Call is the call the tool got.
	Call tools.Call
	// Result is the outcome: Result.Result, Result.Err (a *bub.Error for
	// tool failures and denials) and Result.DurationMS.
	Result *tools.Result
}

// ChatFinished is emitted when a step's interaction is ready to record.
// Handlers observe it. It carries everything Bub's record_chat writes to
// the tape, and its CloudEvent is the record the recorder builds the run's
// tape entries from.
type ChatFinished struct {
	Meta
	// SystemPrompt is the step's full system prompt as the provider got
	// it, after the LLMCallStarted handlers (before_llm_call) — "" when
	// none.
	SystemPrompt string
	// ContextErr is the error that reading the tape context raised, if any.
	ContextErr error
	// NewMessages are the user messages this step added (steering messages
	// first, then the prompt), as the provider got them.
	NewMessages []llm.Message
	// ToolCalls are the tool calls the model requested.
	ToolCalls []llm.ToolCall
	// ToolResults are the results of those calls in call order; nil means
	// the step ran no tools, an empty non-nil slice is recorded as such.
	ToolResults []any
	// Err is the step's error, if any.
	Err error
	// ResponseText is the assistant's text; nil when the step produced
	// none (a tool-calling step), pointing to "" when it answered empty.
	ResponseText *string
	// Provider and Model name the model that answered.
	Provider string
	Model    string
	// Usage is the provider call's token usage, when reported.
	Usage *llm.Usage
}

// Command statuses of [CommandFinished].
const (
	CommandOK    = "ok"
	CommandError = "error"
)

// CommandFinished is emitted when a direct (comma) command finished or
// failed. Handlers observe it.
type CommandFinished struct {
	Meta
	// Command is the raw command line without the leading comma.
	Command string
	// Name is the tool the command ran.
	Name string
	// Status is CommandOK or CommandError.
	Status string
	// Output is the command's output, or the error text on failure.
	Output string
	// ElapsedMS is the command's wall time in milliseconds.
	ElapsedMS int64
	// Err is the command's error, nil when it succeeded.
	Err error
	// Answers is the inbound delivery the command answers, as
	// RunStarted's metadata says for a run (a command run has no
	// RunStarted); the recorder's read-your-writes watermark needs it.
	// Nil for a command that answers none.
	Answers *Answers
}
