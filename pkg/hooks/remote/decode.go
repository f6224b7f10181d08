package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// This file turns reply bytes into decisions. Everything an interceptor
// sends is checked: a reply is either a valid answer of its hook, a remote
// error, or malformed — never a panic and never a silently ignored field
// (a typo such as "desicion" must not turn a deny into no opinion).

// field is one top-level field of a [Reply].
type field uint8

const (
	fDecision field = 1 << iota
	fRequest
	fFinish
	fResult
	fAnswer
	fOK
)

var fieldNames = []struct {
	f    field
	name string
}{
	{fDecision, "decision"}, {fRequest, "request"}, {fFinish, "finish"},
	{fResult, "result"}, {fAnswer, "answer"}, {fOK, "ok"},
}

// allowed returns the reply fields that belong to hook h (error belongs to
// every hook).
func allowed(h hooks.Hook) field {
	switch h {
	case hooks.HookBeforeLLMCall:
		return fRequest | fFinish
	case hooks.HookBeforeToolCall:
		return fDecision
	case hooks.HookAfterToolCall:
		return fResult
	case hooks.HookAfterLLMCall, hooks.HookOnError, hooks.HookSaveState:
		return 0
	}
	return fAnswer | fOK
}

// present returns the fields r carries (null counts as absent, except for
// result, where null is a value).
func (r *Reply) present() field {
	var f field
	if r.Decision != nil {
		f |= fDecision
	}
	if r.Request != nil {
		f |= fRequest
	}
	if r.Finish != nil {
		f |= fFinish
	}
	if len(r.Result) > 0 {
		f |= fResult
	}
	if len(r.Answer) > 0 && !isNull(r.Answer) {
		f |= fAnswer
	}
	if r.OK != nil {
		f |= fOK
	}
	return f
}

// IsEmpty reports whether r carries nothing: the no-opinion reply {}.
func (r *Reply) IsEmpty() bool { return r.present() == 0 && r.Error == nil }

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// emptyReply is the no-opinion reply.
var emptyReply = []byte("{}")

// decodeReply parses the reply to a call of hook h. A remote error (micro
// error headers or an error body) is returned as a *bub.Error in remoteErr;
// a reply that is not a well-formed answer of h yields err wrapping
// [ErrMalformedReply].
func decodeReply(h hooks.Hook, hdr nats.Header, data []byte) (r Reply, remoteErr error, err error) {
	if desc := hdr.Get(micro.ErrorHeader); desc != "" || hdr.Get(micro.ErrorCodeHeader) != "" {
		return r, headerError(desc, hdr.Get(micro.ErrorCodeHeader), data), nil
	}
	if bytes.Equal(data, emptyReply) {
		return r, nil, nil
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		// null among them, which would decode as no opinion.
		return Reply{}, nil, malformed("the reply is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Reply{}, nil, malformed("decoding the reply: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Reply{}, nil, malformed("trailing data after the reply object")
	}
	if r.Error != nil {
		return r, r.Error.Err(), nil
	}
	if extra := r.present() &^ allowed(h); extra != 0 {
		for _, fn := range fieldNames {
			if extra&fn.f != 0 {
				return Reply{}, nil, malformed("field %q does not belong to a %s reply", fn.name, h)
			}
		}
	}
	return r, nil, nil
}

// headerError is the error of a reply with NATS micro error headers; an
// error body, when there is one, supplies the kind and message.
func headerError(desc, code string, data []byte) error {
	var body struct {
		Error *ErrorBody `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		return body.Error.Err()
	}
	if desc == "" {
		desc = "interceptor error " + code
	}
	return &bub.Error{Kind: kindOfCode(code), Message: desc}
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedReply, fmt.Sprintf(format, args...))
}

// The conversions below turn a decoded reply into the answer of one hook;
// each fails with ErrMalformedReply when the values are invalid.

// toolDecision is before_tool_call's decision, nil for no opinion.
func (r *Reply) toolDecision() (*tools.Decision, error) {
	d := r.Decision
	if d == nil {
		return nil, nil
	}
	dec := &tools.Decision{Action: d.Action, Arguments: d.Arguments, Result: d.Result, Message: d.Message, TimeoutMS: d.TimeoutMS, Default: d.Default}
	switch d.Action {
	case tools.ActionProceed, tools.ActionReplace, tools.ActionDeny:
		if d.TimeoutMS != 0 || d.Default != "" {
			return nil, malformed("decision action %q: timeout_ms and default belong to an ask", d.Action)
		}
	case tools.ActionAsk:
		if err := dec.ValidAsk(); err != nil {
			return nil, malformed("%v", err)
		}
	default:
		return nil, malformed("decision action %q: want proceed, replace, deny or ask", d.Action)
	}
	return dec, nil
}

// llmDecision is before_llm_call's answer: a new request, a finish
// decision, or neither.
type llmDecision struct {
	request *llm.Request
	finish  *llm.Decision
}

func (r *Reply) llmDecision() (llmDecision, error) {
	if r.Finish != nil {
		return llmDecision{finish: r.Finish}, nil
	}
	return llmDecision{request: r.Request}, nil
}

// newResult is after_tool_call's answer: set reports whether the
// interceptor assigned a new result.
type newResult struct {
	value any
	set   bool
}

func (r *Reply) newResult() (newResult, error) {
	if len(r.Result) == 0 {
		return newResult{}, nil
	}
	var v any
	if err := json.Unmarshal(r.Result, &v); err != nil {
		return newResult{}, malformed("result: %v", err)
	}
	return newResult{value: v, set: true}, nil
}

// none is the answer of hooks without one.
func (r *Reply) none() (struct{}, error) { return struct{}{}, nil }

// answer is the answer of a firstresult or broadcast hook: ok is false for
// no opinion.
type answer[T any] struct {
	value T
	ok    bool
}

// answerOf decodes the answer of a firstresult or broadcast hook.
func answerOf[T any](r *Reply) (answer[T], error) {
	var a answer[T]
	has := r.present()&fAnswer != 0
	a.ok = has
	if r.OK != nil {
		a.ok = *r.OK
	}
	if !a.ok || !has {
		return answer[T]{ok: a.ok}, nil
	}
	if err := json.Unmarshal(r.Answer, &a.value); err != nil {
		return answer[T]{}, malformed("answer: %v", err)
	}
	return a, nil
}

// admitDecision decodes admit_message's answer and checks its action.
func admitDecision(r *Reply) (answer[hooks.AdmitDecision], error) {
	a, err := answerOf[hooks.AdmitDecision](r)
	if err != nil || !a.ok {
		return a, err
	}
	switch a.value.Action {
	case hooks.AdmitProcess, hooks.AdmitDrop, hooks.AdmitFollowUp, hooks.AdmitSteer:
		return a, nil
	}
	return answer[hooks.AdmitDecision]{}, malformed("admit action %q: want process, drop, follow_up or steer", a.value.Action)
}
