package remote

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
)

// FuzzObject: Object decodes exactly what encoding/json decodes into a
// map[string]any, and fails exactly when it fails.
func FuzzObject(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, ` { "a" : [1, -2.5e3, true, false, null, {"b": "c"}] } `, `{"a": 1, "a": 2}`,
		`{"s": "\u00e9\ud83d\ude00\ud800x\"\\\/\b\f\n\r\t"}`, `{"s": "\xff\xfe ok"}`, `{"n": 1e400}`,
		`{"n": 01}`, `{"n": -}`, `{"n": 1.}`, `{"a": [1,]}`, `{"a" 1}`, `[1]`, `"x"`, `{"a": tru}`, `{} {}`,
		`{"deep": [[[[[{"x": [[]]}]]]]]}`, `{"ctl": "a` + "\x01" + `"}`, `{"esc": "\x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]any
		stdErr := json.Unmarshal(data, &want)
		var got Object
		err := got.UnmarshalJSON(data)
		if (err != nil) != (stdErr != nil) {
			t.Fatalf("%q: Object error %v, encoding/json error %v", data, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(map[string]any(got), want) {
			t.Fatalf("%q: Object %#v, encoding/json %#v", data, got, want)
		}
	})
}

// TestObjectInsideAStruct: encoding/json hands a field's bytes to Object.
func TestObjectInsideAStruct(t *testing.T) {
	var r Request[BeforeToolCallInput]
	data := `{"hook": "before_tool_call", "state": {"session_id": "s", "n": [1, {"x": null}]}, "input": {"call": {"tool": "bash"}}}`
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		t.Fatal(err)
	}
	want := Object{"session_id": "s", "n": []any{1.0, map[string]any{"x": nil}}}
	if !reflect.DeepEqual(r.State, want) || r.Input.Call.Tool != "bash" {
		t.Errorf("decoded %+v", r)
	}
}

// FuzzRequest: a request encoded by encoding/json decodes to the same
// values as encoding/json decodes, and arbitrary bytes decode only when
// they are valid JSON, never panicking.
func FuzzRequest(f *testing.F) {
	f.Add("before_tool_call", "run-1", `{"session_id": "s", "x": [1, "\u00e9"]}`, "bash", `{"cmd": "ls"}`, []byte(`{"hook": "x", "input": {"call": {}}, "extra": [1, {"a": null}]}`))
	f.Add("", "", `null`, "", `null`, []byte(`{"state": {"a": 1e400}}`))
	f.Fuzz(func(t *testing.T, hook, runID, state, tool, args string, raw []byte) {
		var r Request[BeforeToolCallInput]
		if err := r.UnmarshalJSON(raw); err == nil && !json.Valid(raw) {
			t.Fatalf("%q decoded but is not valid JSON", raw)
		}

		var in Request[BeforeToolCallInput]
		if json.Unmarshal([]byte(state), &in.State) != nil || json.Unmarshal([]byte(args), &in.Input.Call.Arguments) != nil {
			return
		}
		in.Hook, in.RunID, in.SessionID, in.Input.Call.Tool = hooks.Hook(hook), runID, runID+hook, tool
		in.Input.Call.RunID, in.Input.Call.CallID = runID, tool+runID
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var got Request[BeforeToolCallInput]
		if err := got.UnmarshalJSON(data); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		var want struct {
			Hook      hooks.Hook          `json:"hook"`
			RunID     string              `json:"run_id"`
			SessionID string              `json:"session_id"`
			State     map[string]any      `json:"state"`
			Input     BeforeToolCallInput `json:"input"`
		}
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if got.Hook != want.Hook || got.RunID != want.RunID || got.SessionID != want.SessionID ||
			!reflect.DeepEqual(map[string]any(got.State), want.State) || !reflect.DeepEqual(got.Input, want.Input) {
			t.Fatalf("%s: decoded %+v, encoding/json %+v", data, got, want)
		}
	})
}

// FuzzEncode: what encodeRequest writes, encoding/json reads back as the
// same values as what encoding/json itself writes.
func FuzzEncode(f *testing.F) {
	f.Add("before_tool_call", `{"s": "a\u0000\"\\<>&\u2028\ud800", "n": [1.5e-9, 1e21, -0, 3], "m": {"z": null, "a": true}}`, "bash", `{"cmd": "ls"}`, "\xff\xfe")
	f.Fuzz(func(t *testing.T, hook, state, tool, args, odd string) {
		var in Request[BeforeToolCallInput]
		if json.Unmarshal([]byte(state), &in.State) != nil || json.Unmarshal([]byte(args), &in.Input.Call.Arguments) != nil {
			return
		}
		if in.State == nil {
			in.State = Object{}
		}
		in.State["odd"], in.State["int"] = odd, len(odd)
		in.Hook, in.RunID, in.SessionID, in.Input.Call.Tool, in.Input.Call.CallID = hooks.Hook(hook), odd, hook+odd, tool, odd
		mine, err := encodeRequest(nil, &in)
		readsAsStd(t, in, mine, err)
	})
}

// readsAsStd checks that mine (encoded with error err) reads back as the
// same value as encoding/json's encoding of v.
func readsAsStd(t *testing.T, v any, mine []byte, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	std, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(mine, &got); err != nil {
		t.Fatalf("%q: %v", mine, err)
	}
	if err := json.Unmarshal(std, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("encoded %s\nencoding/json %s", mine, std)
	}
}

// FuzzEncodeLLM: the hand-written inputs of before_llm_call and
// after_llm_call read back as what encoding/json writes for them, for
// every shape of message the model context holds.
func FuzzEncodeLLM(f *testing.F) {
	f.Add("hi <b> & \u2028", "call_1", `{"a": [1, 2.5e-9]}`, uint8(0xff), 7)
	f.Add("", "", `null`, uint8(0), 0)
	f.Fuzz(func(t *testing.T, text, id, details string, shape uint8, n int) {
		var d map[string]any
		if json.Unmarshal([]byte(details), &d) != nil {
			return
		}
		bit := func(i uint) bool { return shape&(1<<i) != 0 }
		msg := llm.Message{Role: "user", Content: llm.Text(text)}
		if bit(0) {
			msg.Content = llm.Content{Parts: []llm.Part{}}
			if bit(1) {
				msg.Content.Parts = append(msg.Content.Parts, llm.Part{Type: "text", Text: text},
					llm.Part{Type: "image_url", ImageURL: &llm.URLPart{URL: id}},
					llm.Part{Type: "video_url", VideoURL: &llm.URLPart{URL: text}},
					llm.Part{Type: "input_audio", InputAudio: &llm.AudioPart{Data: id, Format: text}})
			}
		}
		call := llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: text, Arguments: details}}
		if bit(2) {
			msg.ToolCalls, msg.ToolCallID, msg.Name = []llm.ToolCall{call, call}, id, text
		}
		req := llm.Request{RunID: id, Model: text, MaxTokens: n}
		if bit(3) {
			req.Messages, req.ToolNames = []llm.Message{msg, {Role: "tool", Content: llm.Text(id)}}, []string{text, id}
		} else if bit(4) {
			req.Messages, req.ToolNames = []llm.Message{}, []string{}
		}
		res := LLMResult{Result: llm.Result{RunID: id, Text: text, DurationMS: int64(n)}}
		if bit(5) {
			res.ToolCalls = []llm.ToolCall{call}
			res.Usage = &llm.Usage{PromptTokens: n, CompletionTokens: -n, TotalTokens: 2 * n}
			if bit(6) {
				res.Usage.PromptTokensDetails = &llm.PromptTokensDetails{CachedTokens: n, CacheWriteTokens: n / 2}
			}
		}
		if bit(7) {
			res.Error = &ErrorBody{Kind: bub.Kind(id), Message: text, Details: d}
		}
		before := Request[BeforeLLMCallInput]{Hook: hooks.HookBeforeLLMCall, RunID: id, Input: BeforeLLMCallInput{Request: req}}
		mine, err := encodeRequest(nil, &before)
		readsAsStd(t, before, mine, err)
		decodesAsStd[BeforeLLMCallInput](t, mine)
		after := Request[AfterLLMCallInput]{Hook: hooks.HookAfterLLMCall, RunID: id, Input: AfterLLMCallInput{Request: req, Result: res}}
		mine, err = encodeRequest(nil, &after)
		readsAsStd(t, after, mine, err)
		decodesAsStd[AfterLLMCallInput](t, mine)
	})
}

// decodesAsStd checks that Request.UnmarshalJSON reads data's input as
// encoding/json reads it.
func decodesAsStd[In any](t *testing.T, data []byte) {
	t.Helper()
	var got Request[In]
	if err := got.UnmarshalJSON(data); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var want struct {
		Input In `json:"input"`
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Input, want.Input) {
		t.Fatalf("%s:\ndecoded       %#v\nencoding/json %#v", data, got.Input, want.Input)
	}
}

// FuzzDecodeLLM: arbitrary bytes decode as an LLM call's input only when
// they are valid JSON, never panicking, and whatever encoding/json reads
// from valid input this decoder reads the same (or both fail).
func FuzzDecodeLLM(f *testing.F) {
	f.Add([]byte(`{"input": {"request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 5}, "result": {"usage": {"prompt_tokens": 1, "prompt_tokens_details": null}, "error": {"kind": "x", "details": {}}}}}`))
	f.Add([]byte(`{"input": {"request": {"max_tokens": 1.5, "messages": null, "tool_names": ["a", null]}}}`))
	f.Add([]byte(`{"input": {"result": {"duration_ms": -0, "tool_calls": [{"function": {"arguments": "{}"}}, null]}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got Request[AfterLLMCallInput]
		err := got.UnmarshalJSON(raw)
		if err == nil && !json.Valid(raw) {
			t.Fatalf("%q decoded but is not valid JSON", raw)
		}
		var want struct {
			Input AfterLLMCallInput `json:"input"`
		}
		if err != nil || json.Unmarshal(raw, &want) != nil || bytes.ContainsFunc(raw, unicode.IsUpper) || repeatsMember(raw) {
			return // encoding/json matches member names in any letter case, and merges repeated ones
		}
		if !reflect.DeepEqual(got.Input, want.Input) {
			t.Fatalf("%s:\ndecoded       %#v\nencoding/json %#v", raw, got.Input, want.Input)
		}
	})
}

// repeatsMember reports whether an object in the valid JSON data names a
// member twice.
func repeatsMember(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		names  map[string]bool
		object bool
		key    bool // the next string token is a member name
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.names[s] {
				return true
			}
			top.names[s], top.key = true, false
			continue
		}
		if top != nil && top.object {
			top.key = true // a value ends here (or a nested one starts; its end resets it)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{names: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}
