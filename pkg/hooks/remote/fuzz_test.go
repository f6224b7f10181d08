package remote

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// parse decodes a reply to hook h exactly as the plugin's method for h
// does, returning the hook's answer.
func parse(h hooks.Hook, hdr nats.Header, data []byte) (any, error) {
	r, remoteErr, err := decodeReply(h, hdr, data)
	if remoteErr != nil {
		return nil, remoteErr
	}
	if err != nil {
		return nil, err
	}
	switch h {
	case hooks.HookBeforeToolCall:
		return r.toolDecision()
	case hooks.HookBeforeLLMCall:
		return r.llmDecision()
	case hooks.HookAfterToolCall:
		return r.newResult()
	case hooks.HookAfterLLMCall, hooks.HookOnError, hooks.HookSaveState:
		return r.none()
	case hooks.HookResolveSession, hooks.HookSystemPrompt, hooks.HookContinuePrompt:
		return answerOf[string](&r)
	case hooks.HookLoadState:
		return answerOf[map[string]any](&r)
	case hooks.HookBuildPrompt:
		return answerOf[llm.Content](&r)
	case hooks.HookRenderOutbound:
		return answerOf[[]*envelope.Envelope](&r)
	case hooks.HookDispatchOutbound:
		return answerOf[bool](&r)
	case hooks.HookProvideRuntimeOptions:
		return answerOf[*hooks.RuntimeOptions](&r)
	case hooks.HookAdmitMessage:
		return admitDecision(&r)
	}
	panic("no conversion for " + h)
}

// FuzzDecodeReply: whatever an interceptor sends, decoding never panics
// and yields a valid answer, a remote *bub.Error, or a malformed-reply
// error with a message.
func FuzzDecodeReply(f *testing.F) {
	seeds := []string{
		`{}`, `{"decision": null}`, `{"decision": {"action": "deny", "message": "no"}}`,
		`{"decision": {"action": "proceed", "arguments": {"path": "a"}}}`, `{"decision": {"action": "replace", "result": [1]}}`,
		`{"decision": {"action": "ask", "message": "rm?", "timeout_ms": 60000, "default": "deny"}}`,
		`{"decision": {"action": "ask", "timeout_ms": 0, "default": "proceed"}}`, `{"decision": {"action": "ask", "timeout_ms": 5, "default": "replace"}}`,
		`{"decision": {"action": "deny", "timeout_ms": 5}}`, `{"decision": {"action": "ask", "timeout_ms": 1e30, "default": "deny"}}`,
		`{"request": {"run_id": "r", "model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}}`,
		`{"finish": {"text": "t"}}`, `{"result": null}`, `{"result": {"a": [1, 2]}}`,
		`{"answer": "x", "ok": true}`, `{"ok": false}`, `{"answer": [{"id": "o", "content": "c"}]}`,
		`{"answer": {"action": "steer"}}`, `{"answer": {"models": [{"id": "a:b"}]}}`,
		`{"error": {"kind": "tool", "message": "m", "details": {"x": 1}}}`,
		`not json`, ``, `{"decision": {}} {}`, `{"answer": "\ud800"}`,
	}
	for _, s := range seeds {
		for i := range served {
			f.Add(uint8(i), "", []byte(s))
		}
	}
	f.Add(uint8(0), "503", []byte(`{"error": {"kind": "temporary", "message": "later"}}`))
	f.Add(uint8(0), "400", []byte(``))
	f.Fuzz(func(t *testing.T, hi uint8, code string, data []byte) {
		h := served[int(hi)%len(served)]
		var hdr nats.Header
		if code != "" {
			hdr = nats.Header{micro.ErrorCodeHeader: []string{code}}
		}
		v, err := parse(h, hdr, data)
		if err == nil {
			valid(t, h, v)
			return
		}
		if err.Error() == "" {
			t.Fatalf("%s: empty error for %q", h, data)
		}
		if errors.Is(err, ErrMalformedReply) {
			return
		}
		if be, ok := errors.AsType[*bub.Error](err); !ok || be.Kind == "" {
			t.Fatalf("%s: error %v for %q is neither malformed nor a remote *bub.Error", h, err, data)
		}
	})
}

// valid fails t when v is not a valid answer of h.
func valid(t *testing.T, h hooks.Hook, v any) {
	switch v := v.(type) {
	case *tools.Decision:
		switch {
		case v == nil:
		case v.Action == tools.ActionAsk:
			if err := v.ValidAsk(); err != nil {
				t.Fatalf("%s: %v", h, err)
			}
		case v.Action != tools.ActionProceed && v.Action != tools.ActionReplace && v.Action != tools.ActionDeny:
			t.Fatalf("%s: decision with action %q", h, v.Action)
		case v.TimeoutMS != 0 || v.Default != "":
			t.Fatalf("%s: %s decision with ask fields", h, v.Action)
		}
	case answer[hooks.AdmitDecision]:
		switch v.value.Action {
		case hooks.AdmitProcess, hooks.AdmitDrop, hooks.AdmitFollowUp, hooks.AdmitSteer:
		default:
			if v.ok {
				t.Fatalf("%s: admit action %q", h, v.value.Action)
			}
		}
	case llmDecision:
		if v.finish != nil && v.request != nil {
			t.Fatalf("%s: both a finish and a request", h)
		}
	}
}
