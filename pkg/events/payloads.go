package events

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	ce "github.com/cloudevents/sdk-go/v2/event"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// This file declares the JSON payload (CloudEvent data) of every type in
// types.go, maps in-process events to them, and decodes them. Each payload
// has a JSON Schema and a golden example in docs/events/; a change that
// breaks a consumer needs a new type version.
//
// Content policy: the request side of an LLM call (llm_call.started
// messages) is left out unless [Codec.CaptureContent] is set. It is big —
// every call resends the whole history, so a run would publish O(steps²)
// bytes against JetStream's per-message limit — and private: everyone
// allowed to read bub.events.> would read every conversation. What a call
// added is always carried: llm_call.finished has the model's text and tool
// calls, a finish decision its text, messages.pending its messages. A
// worker resuming an interrupted run answers the run's completed calls
// from these records instead of calling the model again (package
// agent/recording), and they are O(new content) and no more private than
// chat.finished, which always carries the whole interaction: it is the
// record the recorder builds the tape from. run.started (prompt),
// tool_call.* (arguments and results) and command.finished (output) carry
// their content too, as the tape and the observers need it.

// ErrorData is an error as Bub serializes it (BubError.as_dict): kind,
// message and, when non-empty, details.
type ErrorData struct {
	Kind    string         `json:"kind"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// errorData returns err in Bub's shape, nil for a nil err. Errors that are
// not *bub.Error get kind unknown.
func errorData(err error) *ErrorData {
	if err == nil {
		return nil
	}
	be := bub.AsError(err)
	return &ErrorData{Kind: string(be.Kind), Message: be.Message, Details: be.Details}
}

// RunStartedData is the payload of [TypeRunStarted].
type RunStartedData struct {
	Prompt   llm.Content `json:"prompt"`
	Model    string      `json:"model"`
	Metadata RunMetadata `json:"metadata"`
}

// RunFinishedData is the payload of [TypeRunFinished].
type RunFinishedData struct {
	Status     string     `json:"status"`
	Steps      int        `json:"steps"`
	DurationMS int64      `json:"duration_ms"`
	Error      *ErrorData `json:"error,omitempty"`
}

// StepStartedData is the payload of [TypeStepStarted].
type StepStartedData struct {
	Step   int         `json:"step"`
	Prompt llm.Content `json:"prompt,omitzero"`
}

// StepFinishedData is the payload of [TypeStepFinished].
type StepFinishedData struct {
	Step       int        `json:"step"`
	Status     string     `json:"status"`
	ElapsedMS  int64      `json:"elapsed_ms"`
	Error      *ErrorData `json:"error,omitempty"`
	NextPrompt string     `json:"next_prompt,omitempty"`
}

// MessagesPendingData is the payload of [TypeMessagesPending], with the
// messages the handlers appended.
type MessagesPendingData struct {
	Step         int           `json:"step"`
	AtStepEnd    bool          `json:"at_step_end"`
	MessageCount int           `json:"message_count"`
	Messages     []llm.Message `json:"messages,omitempty"`
}

// LLMCallStartedData is the payload of [TypeLLMCallStarted]. Messages are
// present only with content capture; a finish decision's text always.
type LLMCallStartedData struct {
	Model        string           `json:"model"`
	MaxTokens    int              `json:"max_tokens,omitempty"`
	ToolNames    []string         `json:"tool_names,omitempty"`
	MessageCount int              `json:"message_count"`
	Messages     []llm.Message    `json:"messages,omitempty"`
	Decision     *LLMDecisionData `json:"decision,omitempty"`
}

// LLMDecisionData is a decision set on [LLMCallStarted].
type LLMDecisionData struct {
	// Action is always "finish".
	Action string `json:"action"`
	Text   string `json:"text,omitempty"`
}

// LLMCallFinishedData is the payload of [TypeLLMCallFinished]: the
// model's answer (Text, ToolCalls, ToolCallNames) or its error.
type LLMCallFinishedData struct {
	Model         string         `json:"model"`
	DurationMS    int64          `json:"duration_ms"`
	Usage         *llm.Usage     `json:"usage,omitempty"`
	ToolCallNames []string       `json:"tool_call_names,omitempty"`
	Text          string         `json:"text,omitempty"`
	ToolCalls     []llm.ToolCall `json:"tool_calls,omitempty"`
	Error         *ErrorData     `json:"error,omitempty"`
}

// ToolCallStartedData is the payload of [TypeToolCallStarted].
type ToolCallStartedData struct {
	Tool      string          `json:"tool"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments map[string]any  `json:"arguments,omitempty"`
	Decision  *tools.Decision `json:"decision,omitempty"`
}

// ToolCallFinishedData is the payload of [TypeToolCallFinish].
type ToolCallFinishedData struct {
	Tool       string         `json:"tool"`
	CallID     string         `json:"call_id,omitempty"`
	Arguments  map[string]any `json:"arguments,omitempty"`
	Result     any            `json:"result"`
	Error      *ErrorData     `json:"error,omitempty"`
	DurationMS int64          `json:"duration_ms"`
}

// ChatFinishedData is the payload of [TypeChatFinished]: everything Bub's
// record_chat writes. ToolResults is null when the step ran no tools and
// an array (possibly empty) when it did; ResponseText is null when the
// step produced no text. Error is left out when it is the context error.
type ChatFinishedData struct {
	SystemPrompt string         `json:"system_prompt,omitempty"`
	ContextError *ErrorData     `json:"context_error,omitempty"`
	NewMessages  []llm.Message  `json:"new_messages,omitempty"`
	ToolCalls    []llm.ToolCall `json:"tool_calls,omitempty"`
	ToolResults  []any          `json:"tool_results"`
	Error        *ErrorData     `json:"error,omitempty"`
	ResponseText *string        `json:"response_text"`
	Provider     string         `json:"provider,omitempty"`
	Model        string         `json:"model,omitempty"`
	Usage        *llm.Usage     `json:"usage,omitempty"`
}

// CommandFinishedData is the payload of [TypeCommandFinished].
type CommandFinishedData struct {
	Command   string     `json:"command"`
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	Output    string     `json:"output"`
	ElapsedMS int64      `json:"elapsed_ms"`
	Error     *ErrorData `json:"error,omitempty"`
	// Metadata is the inbound delivery the command answers (see
	// [CommandFinished]).
	Metadata *Answers `json:"metadata,omitempty"`
}

// CommandChangedData is the payload of [TypeCommandChanged].
type CommandChangedData struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	Status  string `json:"status"`
}

// WorkChangedData is the payload of [TypeWorkChanged].
type WorkChangedData struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	Status  string `json:"status"`
}

// PromptChangedData is the payload of [TypePromptChanged].
type PromptChangedData struct {
	ID      string      `json:"id"`
	Channel string      `json:"channel"`
	Prompt  llm.Content `json:"prompt"`
	Status  string      `json:"status"`
}

// HookDecisionData is the payload of [TypeHookDecision].
type HookDecisionData struct {
	Plugin     string         `json:"plugin"`
	Remote     bool           `json:"remote"`
	Hook       string         `json:"hook"`
	Action     string         `json:"action"`
	Detail     map[string]any `json:"detail,omitempty"`
	DurationMS int64          `json:"duration_ms"`
	Error      *ErrorData     `json:"error,omitempty"`
}

// TapeEventData is the payload of [TypeTapeEvent]: a named event entry
// for the session's tape.
type TapeEventData struct {
	Name string         `json:"name"`
	Data map[string]any `json:"data,omitempty"`
}

// TurnErrorData is the payload of [TypeTurnError].
type TurnErrorData struct {
	Stage      string    `json:"stage"`
	EnvelopeID string    `json:"envelope_id,omitempty"`
	Error      ErrorData `json:"error"`
}

// TurnDroppedData is the payload of [TypeTurnDropped]: an inbound
// envelope will not run, because admit_message dropped it (reason
// "admit_message") or ,quit cleared the follow-ups of its session (reason
// "quit"). Services publish it with [New].
type TurnDroppedData struct {
	EnvelopeID string `json:"envelope_id"`
	Reason     string `json:"reason"`
}

// TapeStaleData is the payload of [TypeTapeStale]: a turn waited for the
// recorder to reach the session's watermark and gave up, so it reads a
// tape that may miss entries of earlier turns. Services publish it with
// [New].
type TapeStaleData struct {
	Tape      string `json:"tape"`
	Watermark uint64 `json:"watermark"`
	Committed uint64 `json:"committed"`
	WaitedMS  int64  `json:"waited_ms"`
}

// DeadLetterData is the payload of [TypeDeadLetter]: a message was moved
// to the dead-letter stream. Services publish it with [New].
type DeadLetterData struct {
	Reason     string `json:"reason"`
	Error      string `json:"error"`
	Subject    string `json:"subject"`
	Stream     string `json:"stream,omitempty"`
	StreamSeq  uint64 `json:"stream_seq,omitempty"`
	Deliveries uint64 `json:"deliveries,omitempty"`
}

// payloadTypes maps every built-in CloudEvent type to a constructor of its
// payload. The envelope types carry an [envelope.Envelope].
var payloadTypes = map[string]func() any{
	TypeEnvelopeInbound:   newOf[envelope.Envelope],
	TypeEnvelopeOutbound:  newOf[envelope.Envelope],
	TypeRunStarted:        newOf[RunStartedData],
	TypeRunFinished:       newOf[RunFinishedData],
	TypeStepStarted:       newOf[StepStartedData],
	TypeStepFinished:      newOf[StepFinishedData],
	TypeMessagesPending:   newOf[MessagesPendingData],
	TypeLLMCallStarted:    newOf[LLMCallStartedData],
	TypeLLMCallFinished:   newOf[LLMCallFinishedData],
	TypeToolCallStarted:   newOf[ToolCallStartedData],
	TypeToolCallFinish:    newOf[ToolCallFinishedData],
	TypeChatFinished:      newOf[ChatFinishedData],
	TypeCommandFinished:   newOf[CommandFinishedData],
	TypeCommandChanged:    newOf[CommandChangedData],
	TypeWorkChanged:       newOf[WorkChangedData],
	TypePromptChanged:     newOf[PromptChangedData],
	TypeHookDecision:      newOf[HookDecisionData],
	TypeApprovalRequested: newOf[ApprovalRequestedData],
	TypeApprovalAnswered:  newOf[ApprovalAnsweredData],
	TypeApprovalTimedOut:  newOf[ApprovalTimedOutData],
	TypeTapeEvent:         newOf[TapeEventData],
	TypeTurnError:         newOf[TurnErrorData],
	TypeTurnDropped:       newOf[TurnDroppedData],
	TypeTapeStale:         newOf[TapeStaleData],
	TypeDeadLetter:        newOf[DeadLetterData],
}

func newOf[T any]() any { return new(T) }

// Types returns every built-in CloudEvent type, sorted.
func Types() []string { return slices.Sorted(maps.Keys(payloadTypes)) }

// Conversion errors.
var (
	// ErrUnregistered: a custom event whose type is not in the codec's
	// [Registry]. Such events stay in the process; the [Bridge] skips
	// them.
	ErrUnregistered = errors.New("event type not registered")
	// ErrUnknownType: a CloudEvent type with no known payload.
	ErrUnknownType = errors.New("unknown CloudEvent type")
)

// Codec converts in-process events to CloudEvents and CloudEvent payloads
// back to Go values. The zero value handles the built-in events with
// content capture off.
type Codec struct {
	// Registry maps custom event types to CloudEvent types; nil means
	// built-in events only.
	Registry *Registry
	// CaptureContent includes the messages of llm_call.started payloads
	// (see the content policy in payloads.go). Off by default: they are
	// large and private, and chat.finished already records the
	// interaction.
	CaptureContent bool
}

// ToCloudEvent converts ev with the zero [Codec]: built-in events only,
// without content capture.
func ToCloudEvent(ev Event, a Attrs) (ce.Event, error) { return Codec{}.ToCloudEvent(ev, a) }

// DecodePayload decodes the data of a built-in CloudEvent type with the
// zero [Codec].
func DecodePayload(e ce.Event) (any, error) { return Codec{}.DecodePayload(e) }

// ToCloudEvent returns ev as a CloudEvent of its type built with [New].
// The run and session default to ev's [Meta] when a leaves them empty.
// A custom event not in c.Registry gives [ErrUnregistered].
func (c Codec) ToCloudEvent(ev Event, a Attrs) (ce.Event, error) {
	typ, data, err := c.payload(ev)
	if err != nil {
		return ce.Event{}, err
	}
	return build(ev, typ, data, a)
}

// build returns the CloudEvent of ev, whose type and payload are typ and
// data, filling the run and session of a from ev's Meta.
func build(ev Event, typ string, data any, a Attrs) (ce.Event, error) {
	m := ev.EventMeta()
	if a.RunID == "" {
		a.RunID = m.RunID
	}
	if a.SessionID == "" {
		a.SessionID = m.SessionID
	}
	return New(typ, a, data)
}

// payload returns the CloudEvent type and payload of ev. The built-in
// events implement wireEvent; custom events are their own payload.
func (c Codec) payload(ev Event) (string, any, error) {
	if w, ok := ev.(wireEvent); ok {
		typ, data := w.wire(c.CaptureContent)
		return typ, data, nil
	}
	if typ, ok := c.Registry.typeOf(ev); ok {
		return typ, ev, nil
	}
	return "", nil, fmt.Errorf("events: converting %T: %w", ev, ErrUnregistered)
}

// DecodePayload decodes the data of e into a new value of its payload type
// and returns a pointer to it: *RunStartedData for run.started,
// *envelope.Envelope for the envelope types, the registered Go type (e.g.
// *OrderReviewed, its Meta empty) for a custom type. An unknown type gives
// [ErrUnknownType]; data that does not decode gives [ErrInvalidEvent].
func (c Codec) DecodePayload(e ce.Event) (any, error) {
	var v any
	if mk, ok := payloadTypes[e.Type()]; ok {
		v = mk()
	} else if v, ok = c.Registry.newValue(e.Type()); !ok {
		return nil, fmt.Errorf("events: decoding %q: %w", e.Type(), ErrUnknownType)
	}
	if err := DecodeData(e, v); err != nil {
		return nil, err
	}
	return v, nil
}

// Typed returns the CloudEvent type of a built-in event ev and its
// payload as a pointer to the payload type DecodePayload gives for the
// CloudEvent of ev (*RunStartedData for run.started), holding the event's
// own values: no JSON encoding and decoding. Its JSON is the CloudEvent's
// data; a field of type any holds what the emitter put there (a tool
// result struct, say), where DecodePayload holds its JSON form. The
// worker's local tape recorder maps events through it (package taperec),
// which normalizes entries to their JSON form as the store does. Another
// event gives [ErrUnregistered].
func Typed(ev Event) (typ string, payload any, err error) { return Codec{}.payload(ev) }

// wireEvent is implemented by the built-in events: wire returns the
// CloudEvent type and a pointer to the payload, with message bodies only
// when content is true.
type wireEvent interface {
	wire(content bool) (ceType string, data any)
}

func (e *RunStarted) wire(bool) (string, any) {
	return TypeRunStarted, &RunStartedData{Prompt: e.Prompt, Model: e.Model, Metadata: e.Metadata}
}

func (e *RunFinished) wire(bool) (string, any) {
	return TypeRunFinished, &RunFinishedData{Status: e.Status, Steps: e.Steps, DurationMS: e.DurationMS, Error: errorData(e.Err)}
}

func (e *StepStarted) wire(bool) (string, any) {
	return TypeStepStarted, &StepStartedData{Step: e.Step, Prompt: e.Prompt}
}

func (e *StepFinished) wire(bool) (string, any) {
	return TypeStepFinished, &StepFinishedData{
		Step: e.Step, Status: e.Status, ElapsedMS: e.ElapsedMS, Error: errorData(e.Err), NextPrompt: e.NextPrompt,
	}
}

func (e *MessagesPending) wire(bool) (string, any) {
	return TypeMessagesPending, &MessagesPendingData{Step: e.Step, AtStepEnd: e.AtStepEnd, MessageCount: len(e.Messages), Messages: e.Messages}
}

func (e *LLMCallStarted) wire(content bool) (string, any) {
	d := LLMCallStartedData{
		Model: e.Request.Model, MaxTokens: e.Request.MaxTokens, ToolNames: e.Request.ToolNames,
		MessageCount: len(e.Request.Messages),
	}
	if content {
		d.Messages = e.Request.Messages
	}
	if e.Decision != nil {
		d.Decision = &LLMDecisionData{Action: "finish", Text: e.Decision.Text}
	}
	return TypeLLMCallStarted, &d
}

func (e *LLMCallFinished) wire(bool) (string, any) {
	r := &e.Result
	d := LLMCallFinishedData{Model: e.Request.Model, DurationMS: r.DurationMS, Usage: r.Usage, Error: errorData(r.Err), Text: r.Text, ToolCalls: r.ToolCalls}
	if len(r.ToolCalls) > 0 {
		d.ToolCallNames = make([]string, len(r.ToolCalls))
		for i, tc := range r.ToolCalls {
			d.ToolCallNames[i] = tc.Function.Name
		}
	}
	return TypeLLMCallFinished, &d
}

func (e *ToolCallStarted) wire(bool) (string, any) {
	return TypeToolCallStarted, &ToolCallStartedData{
		Tool: e.Call.Tool, CallID: e.Call.CallID, Arguments: e.Call.Arguments, Decision: e.Decision,
	}
}

func (e *ToolCallFinished) wire(bool) (string, any) {
	d := ToolCallFinishedData{Tool: e.Call.Tool, CallID: e.Call.CallID, Arguments: e.Call.Arguments}
	if r := e.Result; r != nil {
		d.Result, d.Error, d.DurationMS = toolResult(r.Result), errorData(r.Err), r.DurationMS
	}
	return TypeToolCallFinish, &d
}

func (e *ChatFinished) wire(bool) (string, any) {
	d := ChatFinishedData{
		SystemPrompt: e.SystemPrompt,
		ContextError: errorData(e.ContextErr),
		NewMessages:  e.NewMessages,
		ToolCalls:    e.ToolCalls,
		ResponseText: e.ResponseText,
		Provider:     e.Provider,
		Model:        e.Model,
		Usage:        e.Usage,
	}
	if e.ToolResults != nil {
		d.ToolResults = make([]any, len(e.ToolResults))
		for i, r := range e.ToolResults {
			d.ToolResults[i] = toolResult(r)
		}
	}
	if e.Err != nil && !errors.Is(e.Err, e.ContextErr) {
		d.Error = errorData(e.Err)
	}
	return TypeChatFinished, &d
}

// toolResult returns r as the model sees it: an error becomes Bub's
// {kind, message, details?}.
func toolResult(r any) any {
	if err, ok := r.(error); ok {
		return errorData(err)
	}
	return r
}

func (e *CommandFinished) wire(bool) (string, any) {
	return TypeCommandFinished, &CommandFinishedData{
		Command: e.Command, Name: e.Name, Status: e.Status, Output: e.Output, ElapsedMS: e.ElapsedMS, Error: errorData(e.Err), Metadata: e.Answers,
	}
}

func (e *CommandChanged) wire(bool) (string, any) {
	return TypeCommandChanged, &CommandChangedData{ID: e.ID, Command: e.Command, Status: e.Status}
}

func (e *WorkChanged) wire(bool) (string, any) {
	return TypeWorkChanged, &WorkChangedData{ID: e.ID, Channel: e.Channel, Status: e.Status}
}

func (e *PromptChanged) wire(bool) (string, any) {
	return TypePromptChanged, &PromptChangedData{ID: e.ID, Channel: e.Channel, Prompt: e.Prompt, Status: e.Status}
}

func (e *HookDecision) wire(bool) (string, any) {
	return TypeHookDecision, &HookDecisionData{
		Plugin: e.Plugin, Remote: e.Remote, Hook: e.Hook, Action: e.Action, Detail: e.Detail,
		DurationMS: e.DurationMS, Error: errorData(e.Err),
	}
}

func (e *TapeEventRecorded) wire(bool) (string, any) {
	return TypeTapeEvent, &TapeEventData{Name: e.Name, Data: e.Data}
}

func (e *TurnError) wire(bool) (string, any) {
	d := TurnErrorData{Stage: e.Stage, EnvelopeID: e.EnvelopeID}
	if ed := errorData(e.Err); ed != nil {
		d.Error = *ed
	}
	return TypeTurnError, &d
}
