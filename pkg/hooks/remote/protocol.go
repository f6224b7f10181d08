package remote

import (
	"encoding/json"
	"slices"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// This file is the wire protocol of interceptor services, shared by the
// client ([Plugin]) and the server (package interceptor).
// docs/interceptors.md describes it for implementers in other languages.

// served lists the hooks an interceptor service can serve, in [hooks.Specs]
// order. The others exchange values that cannot cross a process boundary
// (streams, stores, channels, CLI commands) or run only at startup.
var served = []hooks.Hook{
	hooks.HookResolveSession,
	hooks.HookLoadState,
	hooks.HookBuildPrompt,
	hooks.HookSaveState,
	hooks.HookRenderOutbound,
	hooks.HookDispatchOutbound,
	hooks.HookProvideRuntimeOptions,
	hooks.HookOnError,
	hooks.HookSystemPrompt,
	hooks.HookAdmitMessage,
	hooks.HookBeforeLLMCall,
	hooks.HookAfterLLMCall,
	hooks.HookBeforeToolCall,
	hooks.HookAfterToolCall,
	hooks.HookContinuePrompt,
}

// Hooks returns the hooks an interceptor service can serve, in
// [hooks.Specs] order.
func Hooks() []hooks.Hook { return slices.Clone(served) }

// Serves reports whether h is a hook an interceptor service can serve.
func Serves(h hooks.Hook) bool { return slices.Contains(served, h) }

// Request is the JSON body of a request to an interceptor endpoint
// (bub.hook.<service>.<hook>). In is the hook's input type below.
type Request[In any] struct {
	Hook      hooks.Hook `json:"hook"`
	RunID     string     `json:"run_id"`
	SessionID string     `json:"session_id"`
	// State is the public turn state (bub.State.Public); changes an
	// interceptor makes to it do not flow back.
	State Object `json:"state"`
	Input In     `json:"input"`
}

// The inputs of the hooks. Each is the hook's input without the turn
// state (which travels in [Request.State]) and with errors as [ErrorBody].
type (
	// SaveStateInput is the input of save_state.
	SaveStateInput struct {
		SessionID   string             `json:"session_id"`
		Message     *envelope.Envelope `json:"message"`
		ModelOutput string             `json:"model_output"`
		// Error is the model stage's failure, absent when it succeeded.
		Error *ErrorBody `json:"error,omitempty"`
	}
	// BuildPromptInput is the input of build_prompt.
	BuildPromptInput struct {
		Message   *envelope.Envelope `json:"message"`
		SessionID string             `json:"session_id"`
	}
	// RenderOutboundInput is the input of render_outbound.
	RenderOutboundInput struct {
		Message     *envelope.Envelope `json:"message"`
		SessionID   string             `json:"session_id"`
		ModelOutput string             `json:"model_output"`
	}
	// OnErrorInput is the input of on_error.
	OnErrorInput struct {
		Stage   string             `json:"stage"`
		Error   *ErrorBody         `json:"error,omitempty"`
		Message *envelope.Envelope `json:"message,omitempty"`
	}
	// SystemPromptInput is the input of system_prompt.
	SystemPromptInput struct {
		Prompt string `json:"prompt"`
	}
	// BeforeLLMCallInput is the input of before_llm_call.
	BeforeLLMCallInput struct {
		Request llm.Request `json:"request"`
	}
	// AfterLLMCallInput is the input of after_llm_call.
	AfterLLMCallInput struct {
		Request llm.Request `json:"request"`
		Result  LLMResult   `json:"result"`
	}
	// LLMResult is an [llm.Result] with its error.
	LLMResult struct {
		llm.Result
		Error *ErrorBody `json:"error,omitempty"`
	}
	// BeforeToolCallInput is the input of before_tool_call.
	BeforeToolCallInput struct {
		Call tools.Call `json:"call"`
	}
	// AfterToolCallInput is the input of after_tool_call.
	AfterToolCallInput struct {
		Call   tools.Call `json:"call"`
		Result ToolResult `json:"result"`
	}
	// ToolResult is a [tools.Result] with its error.
	ToolResult struct {
		tools.Result
		Error *ErrorBody `json:"error,omitempty"`
	}
	// ContinuePromptInput is the input of continue_prompt; its run and
	// session ids are those of the [Request].
	ContinuePromptInput struct {
		Step   int         `json:"step"`
		Prompt llm.Content `json:"prompt"`
		Usage  *llm.Usage  `json:"usage,omitempty"`
	}
)

// resolve_session, load_state, dispatch_outbound, provide_runtime_options
// and admit_message carry no state and no error, so their inputs are the
// hooks package's own: [hooks.ResolveSessionInput], [hooks.LoadStateInput],
// [hooks.DispatchOutboundInput], [hooks.RuntimeOptionsInput] and
// [hooks.AdmitMessageInput].

// Reply is the JSON body of an interceptor's reply: {} is no opinion, and
// each hook uses the fields below that belong to it (see
// docs/interceptors.md). A field that does not belong to the hook makes the
// reply malformed.
type Reply struct {
	// Decision answers before_tool_call; null is no opinion.
	Decision *ToolDecision `json:"decision,omitempty"`
	// Request is before_llm_call's modified request.
	Request *llm.Request `json:"request,omitempty"`
	// Finish is before_llm_call's finish decision (it wins over Request).
	Finish *llm.Decision `json:"finish,omitempty"`
	// Result is after_tool_call's new tool result (any JSON value, null
	// included); absent leaves the result unchanged.
	Result json.RawMessage `json:"result,omitempty"`
	// Answer is the answer of the firstresult and broadcast hooks.
	Answer json.RawMessage `json:"answer,omitempty"`
	// OK says whether Answer is an answer; when absent, a present non-null
	// Answer is one. {"ok": true} without Answer answers the zero value.
	OK *bool `json:"ok,omitempty"`
	// Error is the hook's failure.
	Error *ErrorBody `json:"error,omitempty"`
}

// ToolDecision is a [tools.Decision] on the wire. Unlike tools.Decision it
// keeps proceed with empty arguments ({}) distinct from proceed without
// new arguments (absent or null).
type ToolDecision struct {
	Action    tools.Action   `json:"action"`
	Arguments map[string]any `json:"arguments,omitzero"`
	Result    any            `json:"result,omitzero"`
	Message   string         `json:"message,omitzero"`
	// TimeoutMS and Default belong to an ask (the reason is Message).
	TimeoutMS int64        `json:"timeout_ms,omitzero"`
	Default   tools.Action `json:"default,omitzero"`
}

// WireDecision returns d on the wire, nil for nil.
func WireDecision(d *tools.Decision) *ToolDecision {
	if d == nil {
		return nil
	}
	return &ToolDecision{Action: d.Action, Arguments: d.Arguments, Result: d.Result, Message: d.Message, TimeoutMS: d.TimeoutMS, Default: d.Default}
}

// ErrorBody is an error on the wire, the shape of [bub.Error.AsMap]. An
// error that is not a *bub.Error travels with kind "unknown".
type ErrorBody struct {
	Kind    bub.Kind       `json:"kind"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// WireError returns err on the wire, nil for nil.
func WireError(err error) *ErrorBody {
	if err == nil {
		return nil
	}
	be := bub.AsError(err)
	return &ErrorBody{Kind: be.Kind, Message: be.Message, Details: be.Details}
}

// Err returns the error as a *bub.Error (kind "unknown" when the kind is
// empty), nil for nil.
func (e *ErrorBody) Err() error {
	if e == nil {
		return nil
	}
	kind := e.Kind
	if kind == "" {
		kind = bub.KindUnknown
	}
	return &bub.Error{Kind: kind, Message: e.Message, Details: e.Details}
}

// ErrorCode returns the NATS micro error code (Nats-Service-Error-Code) an
// interceptor answers a failure of the given kind with.
func ErrorCode(kind bub.Kind) string {
	switch kind {
	case bub.KindInvalidInput:
		return "400"
	case bub.KindNotFound:
		return "404"
	case bub.KindTemporary:
		return "503"
	}
	return "500"
}

// kindOfCode maps a micro error code back to an error kind, for replies
// that carry no error body.
func kindOfCode(code string) bub.Kind {
	switch code {
	case "400":
		return bub.KindInvalidInput
	case "404":
		return bub.KindNotFound
	case "503":
		return bub.KindTemporary
	}
	return bub.KindUnknown
}
