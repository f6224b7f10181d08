package remote

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// TestRequestWire pins the bytes of a request: members in the order of
// the docs, state keys sorted, no call_id for a command, <, > and & as
// they are, U+2028 and invalid UTF-8 escaped, numbers as strconv writes them
// (1.5e-9, where encoding/json writes 1.5e-9; both read the same).
func TestRequestWire(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Request[BeforeToolCallInput]
		want string
	}{
		{"call", Request[BeforeToolCallInput]{
			Hook: hooks.HookBeforeToolCall, RunID: "01JD", SessionID: "telegram:42",
			State: map[string]any{"session_id": "telegram:42", "model": "openai:gpt-4o", "n": []any{1.0, 1.5e-9, 1e21, nil, true}},
			Input: BeforeToolCallInput{Call: tools.Call{RunID: "01JD", Tool: "bash", CallID: "call_1",
				Arguments: map[string]any{"cmd": "ls <a> && echo \"\u2028\xff\t\""}}},
		}, `{"hook":"before_tool_call","run_id":"01JD","session_id":"telegram:42",` +
			`"state":{"model":"openai:gpt-4o","n":[1,1.5e-9,1e+21,null,true],"session_id":"telegram:42"},` +
			`"input":{"call":{"run_id":"01JD","tool":"bash","arguments":{"cmd":"ls <a> && echo \"\u2028\ufffd\t\""},"call_id":"call_1"}}}`},
		{"command", Request[BeforeToolCallInput]{Hook: hooks.HookBeforeToolCall, Input: BeforeToolCallInput{Call: tools.Call{Tool: "bash"}}},
			`{"hook":"before_tool_call","run_id":"","session_id":"","state":null,"input":{"call":{"run_id":"","tool":"bash","arguments":null}}}`},
	} {
		got, err := encodeRequest([]byte("reused"), &c.r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "reused"+c.want {
			t.Errorf("%s:\n got %s\nwant reused%s", c.name, got, c.want)
		}
	}
}

// TestDocumentedRequest: the request body in docs/interceptors.md is a
// before_tool_call request with no member a Request lacks, and encodes
// back to the same JSON value.
func TestDocumentedRequest(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/interceptors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte("Body (JSON):\n\n```json\n"))
	body, _, ok2 := bytes.Cut(after, []byte("```"))
	if !ok || !ok2 {
		t.Fatal("docs/interceptors.md has no request body example")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r Request[BeforeToolCallInput]
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	if r.Hook != hooks.HookBeforeToolCall || r.Input.Call.Tool == "" || r.State["session_id"] != r.SessionID {
		t.Errorf("decoded %+v", r)
	}
	data, err := encodeRequest(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("encoded %s\nthe docs show %s", data, body)
	}
}
