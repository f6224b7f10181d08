package interceptor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// loudFailure fails every tool call with a 2 MiB error message.
type loudFailure struct{}

func (loudFailure) Name() string { return "loud" }

func (loudFailure) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, bub.Errorf(bub.KindTool, "policy failed: %s", strings.Repeat("x", 2<<20))
}

// TestLargeErrorReplyIsAnswered (failed before the fix): an error whose message is larger
// than the server's max_payload is never answered. Service.fail
// (serve.go:348-357) caps the Nats-Service-Error header at 1 KiB but puts
// the whole message into the {"error": …} body, so req.Error fails with
// "maximum payload exceeded"; the failure is only logged
// (interceptor.reply_failed) and the caller waits its whole timeout,
// counting a timeout instead of the remote error it got. Service.reply
// guards exactly this case for ordinary replies (serve.go:334-340, and
// docs/interceptors.md, outcome remote_error: the Go SDK answers at once
// rather than leave the call to its timeout); the error path does not.
// Expected: an error reply at once (e.g. the kind with a truncated
// message, or a config error naming the sizes).
func TestLargeErrorReplyIsAnswered(t *testing.T) {
	s := natstest.Start(t)
	names := subjects.Default()
	serve(t, s.Conn(t), names, loudFailure{})
	resp, err := s.Conn(t).Request(names.Hook("loud", string(hooks.HookBeforeToolCall)),
		[]byte(`{"hook": "before_tool_call", "input": {"call": {"tool": "bash"}}}`), 3*time.Second)
	if err != nil {
		t.Fatalf("request: %v; want an error reply, not silence", err)
	}
	var body struct {
		Error struct{ Kind, Message string }
	}
	if resp.Header.Get(micro.ErrorCodeHeader) == "" || json.Unmarshal(resp.Data, &body) != nil || body.Error.Kind == "" {
		t.Errorf("reply headers %v body %.200s; want a NATS micro error reply with an error body", resp.Header, resp.Data)
	}
}
