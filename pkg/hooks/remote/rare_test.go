package remote_test

import (
	"errors"
	"testing"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// TestNullReplyIsMalformed (failed before the fix): a reply whose body is the JSON literal
// null is not a JSON object, so it is neither "no opinion" ({}) nor any
// valid answer of a hook (docs/interceptors.md, "Reply": "A JSON object
// …"; "so a broken policy never silently becomes allow"). decodeReply
// (decode.go:103-121) hands it to json.Decoder.Decode, which leaves the
// Reply zero for null without an error, so the reply is taken as "no
// opinion". A broken policy that answers null (for example a Python
// handler that forgot to return its dict, json.dumps(None)) therefore lets
// every tool call through, even when the interceptor fails closed.
// Expected: the reply is malformed, so a fail-open call fails with
// ErrMalformedReply and a fail-closed one is denied.
func TestNullReplyIsMalformed(t *testing.T) {
	e := newEnv(t)
	e.respond(t, "nullpolicy", hooks.HookBeforeToolCall, nil, `null`)

	open, _, _ := e.client(t, remote.Config{Service: "nullpolicy", Timeout: callTimeout,
		Hooks: []hooks.Hook{hooks.HookBeforeToolCall}})
	dec, err := open.BeforeToolCall(t.Context(), toolCall())
	if !errors.Is(err, remote.ErrMalformedReply) {
		t.Errorf("fail-open: reply null gave decision %+v, error %v; want a malformed-reply error", dec, err)
	}

	closed, _, _ := e.client(t, remote.Config{Service: "nullpolicy", Timeout: callTimeout, Failure: remote.FailClosed,
		Hooks: []hooks.Hook{hooks.HookBeforeToolCall}})
	dec, err = closed.BeforeToolCall(t.Context(), toolCall())
	if err != nil || dec == nil || dec.Action != tools.ActionDeny {
		t.Errorf("fail-closed: reply null gave decision %+v, error %v; want the call denied (malformed reply)", dec, err)
	}
	if st := closed.Stats(); st.Malformed != 1 {
		t.Errorf("fail-closed stats = %+v, want one malformed", st)
	}
}

// TestFailClosedStartWithoutServableHooks (failed before the fix): a fail-closed interceptor
// whose running instances answer discovery but serve none of the hooks the
// worker can call (here: the service was started under another subject
// prefix, so its endpoints are acme.hook.policy.* while the worker calls
// bub.hook.policy.*) guards nothing. Start (plugin.go:137-159) only checks
// that instances answered (case err == nil && instances > 0) and accepts
// an empty set of discovered hooks, logging it at debug level, so the
// worker starts and every tool call runs unguarded. docs/interceptors.md
// ("Discovery") says a fail-closed interceptor that cannot enforce anything
// stops the worker from starting. Expected: Start fails (as it does when no
// instance answers) when discovery found no hook at all.
func TestFailClosedStartWithoutServableHooks(t *testing.T) {
	e := newEnv(t)
	acme, err := subjects.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := interceptor.Serve(t.Context(), e.serverNC, acme, allow{}, interceptor.WithName("policy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(t.Context()) })

	p, err := remote.New(e.clientNC, e.names, remote.Config{Service: "policy", Timeout: callTimeout, Failure: remote.FailClosed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(t.Context())
	if err == nil {
		t.Errorf("fail-closed Start succeeded although the instances serve no hook under %q (serves before_tool_call: %v); want an error: the interceptor can enforce nothing",
			e.names.HookService("policy"), p.ServesHook(hooks.HookBeforeToolCall))
	}
}
