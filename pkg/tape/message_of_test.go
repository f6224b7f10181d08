package tape

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/llm"
)

// roundTrip is messageOf's general conversion, which plainMessageOf must
// agree with.
func roundTrip(t testing.TB, payload map[string]any) (llm.Message, bool) {
	t.Helper()
	var m llm.Message
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return m, json.Unmarshal(b, &m) == nil
}

// TestPlainMessageOfAgreesWithTheRoundTrip: the fast conversion of plain
// message payloads gives what the JSON round trip gives, and declines
// every payload it cannot convert the same way.
func TestPlainMessageOfAgreesWithTheRoundTrip(t *testing.T) {
	for _, c := range []struct {
		payload map[string]any
		fast    bool
	}{
		{map[string]any{"role": "user", "content": "hi"}, true},
		{map[string]any{"role": "assistant", "content": nil}, true},
		{map[string]any{"role": "assistant"}, true},
		{map[string]any{"role": "tool", "content": "42", "tool_call_id": "c1", "name": "calc"}, true},
		{map[string]any{}, true},
		{map[string]any{"role": "user", "content": "\xff bad"}, false}, // the round trip repairs it
		{map[string]any{"Role": "user", "content": "hi"}, false},       // matched case-insensitively
		{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "x"}}}, false},
		{map[string]any{"role": "user", "content": 5.0}, false},
		{map[string]any{"role": "assistant", "content": "", "tool_calls": []any{}}, false},
	} {
		got, ok := plainMessageOf(c.payload)
		if ok != c.fast {
			t.Errorf("%v: fast %v, want %v", c.payload, ok, c.fast)
			continue
		}
		if !ok {
			continue
		}
		want, wok := roundTrip(t, c.payload)
		if !wok || !reflect.DeepEqual(got, want) {
			t.Errorf("%v: %+v, the round trip gives %+v (%v)", c.payload, got, want, wok)
		}
	}
}

func FuzzPlainMessageOf(f *testing.F) {
	f.Add("user", "hi", "", "", false)
	f.Add("tool", "\xff", "c1", "calc", true)
	f.Fuzz(func(t *testing.T, role, content, id, name string, nullContent bool) {
		payload := map[string]any{"role": role, "content": content}
		if nullContent {
			payload["content"] = nil
		}
		if id != "" {
			payload["tool_call_id"] = id
		}
		if name != "" {
			payload["name"] = name
		}
		got, ok := plainMessageOf(payload)
		if !ok {
			return
		}
		if want, wok := roundTrip(t, payload); !wok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, the round trip gives %+v", payload, got, want)
		}
	})
}
