package hooks

import (
	"context"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// This file is the Go counterpart of Bub's hookspecs.py: one interface and
// one input struct per hook. Firstresult hooks return ok=false for "no
// opinion", which is distinct from an empty answer. Every method takes ctx
// first and returns an error, so a plugin that forwards to a remote service
// implements the same interfaces as an in-process one.

// ResolveSessionInput is the input of resolve_session.
type ResolveSessionInput struct {
	Message *envelope.Envelope `json:"message"`
}

// SessionResolver implements resolve_session (firstresult): the session id
// of an inbound message.
type SessionResolver interface {
	ResolveSession(ctx context.Context, in ResolveSessionInput) (sessionID string, ok bool, err error)
}

// LoadStateInput is the input of load_state.
type LoadStateInput struct {
	Message   *envelope.Envelope `json:"message"`
	SessionID string             `json:"session_id"`
}

// StateLoader implements load_state (broadcast): entries to merge into the
// turn state. A nil map contributes nothing.
type StateLoader interface {
	LoadState(ctx context.Context, in LoadStateInput) (map[string]any, error)
}

// BuildPromptInput is the input of build_prompt.
type BuildPromptInput struct {
	Message   *envelope.Envelope `json:"message"`
	SessionID string             `json:"session_id"`
	State     *bub.State         `json:"state"`
}

// PromptBuilder implements build_prompt (firstresult): the prompt text or
// content parts of a turn.
type PromptBuilder interface {
	BuildPrompt(ctx context.Context, in BuildPromptInput) (prompt llm.Content, ok bool, err error)
}

// RunModelInput is the input of run_model and run_model_stream.
type RunModelInput struct {
	Prompt    llm.Content `json:"prompt"`
	SessionID string      `json:"session_id"`
	State     *bub.State  `json:"state"`
	// Inbound is the delivery of the turn's inbound message, nil outside
	// a turn. It stays in the process.
	Inbound *Inbound `json:"-"`
}

// Inbound is one delivery of a turn's inbound message: what the model
// stage of a process that runs turns from a stream needs besides the
// prompt (the worker records which delivery its run answers, and drains
// the turn's steering inbox).
type Inbound struct {
	// Message is the inbound envelope.
	Message *envelope.Envelope
	// StreamSeq is the message's inbound stream sequence, 0 when it came
	// from no stream.
	StreamSeq uint64
	// Delivery counts the deliveries of the message (1 = first), 0 when
	// unknown.
	Delivery uint64
	// Steering is the turn's steering inbox, nil when it has none.
	Steering Steering
}

// Steering is the steering inbox of a running turn: Drain claims the
// messages steered into the turn since the last drain, in arrival order.
type Steering interface {
	Drain(ctx context.Context) ([]*envelope.Envelope, error)
}

// ModelRunner implements run_model (firstresult), the legacy plain-text
// model path. A plugin implements ModelRunner or [ModelStreamer], not both.
type ModelRunner interface {
	RunModel(ctx context.Context, in RunModelInput) (output string, ok bool, err error)
}

// ModelStreamer implements run_model_stream (firstresult), the preferred
// model path.
type ModelStreamer interface {
	RunModelStream(ctx context.Context, in RunModelInput) (stream Stream, ok bool, err error)
}

// SaveStateInput is the input of save_state.
type SaveStateInput struct {
	SessionID   string             `json:"session_id"`
	State       *bub.State         `json:"state"`
	Message     *envelope.Envelope `json:"message"`
	ModelOutput string             `json:"model_output"`
	// Err is the model stage's failure, nil when it succeeded.
	Err error `json:"-"`
}

// StateSaver implements save_state (broadcast), called after the model
// stage whether it succeeded or failed.
type StateSaver interface {
	SaveState(ctx context.Context, in SaveStateInput) error
}

// RenderOutboundInput is the input of render_outbound.
type RenderOutboundInput struct {
	Message     *envelope.Envelope `json:"message"`
	SessionID   string             `json:"session_id"`
	State       *bub.State         `json:"state"`
	ModelOutput string             `json:"model_output"`
}

// OutboundRenderer implements render_outbound (broadcast): a batch of
// outbound envelopes.
type OutboundRenderer interface {
	RenderOutbound(ctx context.Context, in RenderOutboundInput) ([]*envelope.Envelope, error)
}

// DispatchOutboundInput is the input of dispatch_outbound.
type DispatchOutboundInput struct {
	Message *envelope.Envelope `json:"message"`
}

// OutboundDispatcher implements dispatch_outbound (broadcast): deliver one
// outbound envelope, reporting whether it was sent.
type OutboundDispatcher interface {
	DispatchOutbound(ctx context.Context, in DispatchOutboundInput) (sent bool, err error)
}

// RegisterCLICommandsInput is the input of register_cli_commands.
type RegisterCLICommandsInput struct {
	App CLIApp `json:"-"`
}

// CLICommandRegistrar implements register_cli_commands (startup).
type CLICommandRegistrar interface {
	RegisterCLICommands(ctx context.Context, in RegisterCLICommandsInput) error
}

// OnboardConfigInput is the input of onboard_config.
type OnboardConfigInput struct {
	// Current is a copy of the configuration collected so far.
	Current map[string]any `json:"current_config"`
	// Prompter asks the person onboarding for values; it answers from
	// flags or standard input when `bub onboard` runs non-interactively.
	Prompter Prompter `json:"-"`
}

// ConfigOnboarder implements onboard_config (startup): a configuration
// fragment to merge, nil for none.
type ConfigOnboarder interface {
	OnboardConfig(ctx context.Context, in OnboardConfigInput) (map[string]any, error)
}

// RuntimeOptionsInput is the input of provide_runtime_options.
type RuntimeOptionsInput struct {
	SessionID string `json:"session_id"`
	// Workspace is the workspace directory, empty when unknown.
	Workspace string `json:"workspace,omitempty"`
}

// RuntimeOptionsProvider implements provide_runtime_options (broadcast):
// runtime choices, nil for none.
type RuntimeOptionsProvider interface {
	ProvideRuntimeOptions(ctx context.Context, in RuntimeOptionsInput) (*RuntimeOptions, error)
}

// OnErrorInput is the input of on_error.
type OnErrorInput struct {
	Stage string `json:"stage"`
	Err   error  `json:"-"`
	// Message is the inbound message of the failed turn, nil when none.
	Message *envelope.Envelope `json:"message,omitempty"`
}

// ErrorObserver implements on_error (observer). Its failures are logged and
// never hide the original error.
type ErrorObserver interface {
	OnError(ctx context.Context, in OnErrorInput) error
}

// SystemPromptInput is the input of system_prompt.
type SystemPromptInput struct {
	// Prompt is the step's prompt as plain text.
	Prompt string     `json:"prompt"`
	State  *bub.State `json:"state"`
}

// SystemPrompter implements system_prompt (broadcast, joined): a fragment
// of the system prompt; "" contributes nothing.
type SystemPrompter interface {
	SystemPrompt(ctx context.Context, in SystemPromptInput) (string, error)
}

// ProvideTapeStoreInput is the (empty, extensible) input of
// provide_tape_store.
type ProvideTapeStoreInput struct{}

// TapeStoreProvider implements provide_tape_store (firstresult, scope) for
// stores of type S. A store that implements [Closer] is closed when the
// scope ends.
type TapeStoreProvider[S any] interface {
	ProvideTapeStore(ctx context.Context, in ProvideTapeStoreInput) (store S, ok bool, err error)
}

// ProvideChannelsInput is the input of provide_channels.
type ProvideChannelsInput struct {
	// Handler receives the messages the channels accept.
	Handler MessageHandler `json:"-"`
}

// ChannelProvider implements provide_channels (startup, deduplicated).
type ChannelProvider interface {
	ProvideChannels(ctx context.Context, in ProvideChannelsInput) ([]Channel, error)
}

// BuildTapeContextInput is the (empty, extensible) input of
// build_tape_context.
type BuildTapeContextInput struct{}

// TapeContextBuilder implements build_tape_context (firstresult, startup)
// for tape contexts of type C.
type TapeContextBuilder[C any] interface {
	BuildTapeContext(ctx context.Context, in BuildTapeContextInput) (tapeContext C, ok bool, err error)
}

// AdmitMessageInput is the input of admit_message.
type AdmitMessageInput struct {
	SessionID string             `json:"session_id"`
	Message   *envelope.Envelope `json:"message"`
	Turn      TurnSnapshot       `json:"turn"`
}

// MessageAdmitter implements admit_message (firstresult): how to schedule
// a channel message for a session that may be running a turn.
type MessageAdmitter interface {
	AdmitMessage(ctx context.Context, in AdmitMessageInput) (decision AdmitDecision, ok bool, err error)
}

// AdmissionScoper is the optional capability of a [MessageAdmitter] that
// knows ahead of time, from the message alone, that it will never answer
// admit_message with anything but process (or no answer) for it. A
// runtime where no implementation may decide a message's admission
// processes it without asking, and without the turn snapshot the hook's
// input needs. An admitter without the capability may always decide.
type AdmissionScoper interface {
	MayAdmit(msg *envelope.Envelope) bool
}

// BeforeLLMCallInput is the input of before_llm_call.
type BeforeLLMCallInput struct {
	// Request is the request as modified by higher-priority implementations.
	// Treat it as read-only: return a modified copy ([llm.Request.Clone]).
	Request llm.Request `json:"request"`
	State   *bub.State  `json:"state"`
}

// LLMCallInterceptor implements before_llm_call (chained): a replacement
// request (nil = unchanged) or a finish decision that skips the provider.
type LLMCallInterceptor interface {
	BeforeLLMCall(ctx context.Context, in BeforeLLMCallInput) (*llm.Request, *llm.Decision, error)
}

// AfterLLMCallInput is the input of after_llm_call.
type AfterLLMCallInput struct {
	Request llm.Request `json:"request"`
	// Result.Err is the provider's original error when the call failed.
	Result llm.Result `json:"result"`
	State  *bub.State `json:"state"`
}

// LLMCallObserver implements after_llm_call (observer).
type LLMCallObserver interface {
	AfterLLMCall(ctx context.Context, in AfterLLMCallInput) error
}

// BeforeToolCallInput is the input of before_tool_call.
type BeforeToolCallInput struct {
	// Call is the call as modified by higher-priority implementations.
	// Treat it as read-only: return tools.Proceed with new arguments.
	Call  tools.Call `json:"call"`
	State *bub.State `json:"state"`
}

// ToolCallInterceptor implements before_tool_call (chained): nil for no
// opinion, or a [tools.Decision] (proceed, possibly with new arguments;
// replace; deny).
type ToolCallInterceptor interface {
	BeforeToolCall(ctx context.Context, in BeforeToolCallInput) (*tools.Decision, error)
}

// AfterToolCallInput is the input of after_tool_call.
type AfterToolCallInput struct {
	Call tools.Call `json:"call"`
	// Result is shared by every implementation: assigning Result.Result
	// changes what later implementations and the model see. Result.Err is
	// the original *bub.Error of a failed or denied call.
	Result *tools.Result `json:"result"`
	State  *bub.State    `json:"state"`
}

// ToolCallObserver implements after_tool_call (observer).
type ToolCallObserver interface {
	AfterToolCall(ctx context.Context, in AfterToolCallInput) error
}

// ContinuePromptInput is the input of continue_prompt.
type ContinuePromptInput struct {
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id"`
	// Step is the number of the step that just finished, from 1.
	Step int `json:"step"`
	// Prompt is the prompt of the step that just finished.
	Prompt llm.Content `json:"prompt"`
	// State is the tape context state, which is the turn state.
	State *bub.State `json:"state"`
	// Usage is the token usage of the step that just finished, if known.
	Usage *llm.Usage `json:"usage,omitempty"`
}

// PromptContinuer implements continue_prompt (firstresult): the prompt of
// the next agent step after a step that used tools.
type PromptContinuer interface {
	ContinuePrompt(ctx context.Context, in ContinuePromptInput) (prompt string, ok bool, err error)
}

// ProvideSteeringInboxInput is the (empty, extensible) input of
// provide_steering_inbox.
type ProvideSteeringInboxInput struct{}

// SteeringInboxProvider implements provide_steering_inbox (firstresult,
// scope). An inbox that implements [Closer] is closed when the scope ends.
type SteeringInboxProvider interface {
	ProvideSteeringInbox(ctx context.Context, in ProvideSteeringInboxInput) (inbox SteeringInbox, ok bool, err error)
}
