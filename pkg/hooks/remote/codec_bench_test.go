package remote

import (
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// benchRequest is the before_tool_call request of BenchmarkInterceptorHop.
func benchRequest() Request[BeforeToolCallInput] {
	call := tools.Call{RunID: "01JABCDEF0123456789ABCDEFG", Tool: "bash", CallID: "call_1",
		Arguments: map[string]any{"cmd": "go test ./...", "timeout_seconds": 30.0}}
	state := bub.NewState(map[string]any{bub.StateSessionID: "http:42", bub.StateModel: "openai:gpt-4o", "mode": "default"})
	return Request[BeforeToolCallInput]{Hook: hooks.HookBeforeToolCall, RunID: call.RunID, SessionID: "http:42",
		State: state.Public(), Input: BeforeToolCallInput{Call: call}}
}

// BenchmarkEncodeRequest measures the plugin's encoding of one request,
// the client's share of a hop's JSON work.
func BenchmarkEncodeRequest(b *testing.B) {
	r := benchRequest()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = encodeRequest(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkDecodeRequest measures interceptor.Serve's decoding of one
// request, the server's share.
func BenchmarkDecodeRequest(b *testing.B) {
	r := benchRequest()
	data, err := encodeRequest(nil, &r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var got Request[BeforeToolCallInput]
		if err := got.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}
