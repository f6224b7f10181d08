package tape

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// Entry kinds (Bub's TapeEntry kinds).
const (
	KindMessage    = "message"
	KindSystem     = "system"
	KindAnchor     = "anchor"
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
	KindError      = "error"
	KindEvent      = "event"
)

// Entry is one immutable tape record, Bub's TapeEntry. Its JSON form is the
// line format of Bub's tape files: {id, kind, payload, meta, date}.
//
// ID is 0 until a store assigns it; stores number the entries of each tape
// 1, 2, 3, … in append order. Payload and Meta hold JSON values only
// (map[string]any, []any, string, float64, bool, nil) once stored. Date is
// an ISO-8601 UTC time with a "+00:00" offset (see [FormatDate]).
type Entry struct {
	ID      int64          `json:"id"`
	Kind    string         `json:"kind"`
	Payload map[string]any `json:"payload"`
	Meta    map[string]any `json:"meta"`
	Date    string         `json:"date"`
}

// FormatDate renders t the way Python's datetime.isoformat renders an aware
// UTC time: "2006-01-02T15:04:05.000000+00:00", the microseconds omitted when
// they are zero.
func FormatDate(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000") + "+00:00"
}

func newEntry(kind string, payload map[string]any, meta []map[string]any) Entry {
	m := map[string]any{}
	for _, x := range meta {
		maps.Copy(m, x)
	}
	return Entry{Kind: kind, Payload: payload, Meta: m, Date: FormatDate(time.Now())}
}

// MessageEntry returns a message entry whose payload is the chat message
// itself ({role, content, …}). Extra meta maps are merged in order.
func MessageEntry[M llm.Message | map[string]any](message M, meta ...map[string]any) Entry {
	var payload map[string]any
	switch m := any(message).(type) {
	case llm.Message:
		payload = toMap(m)
	case map[string]any:
		payload = maps.Clone(m)
	}
	return newEntry(KindMessage, payload, meta)
}

// System returns a system entry {content}.
func System(content string, meta ...map[string]any) Entry {
	return newEntry(KindSystem, map[string]any{"content": content}, meta)
}

// Anchor returns an anchor entry {name} plus state when state is not nil.
func Anchor(name string, state map[string]any, meta ...map[string]any) Entry {
	payload := map[string]any{"name": name}
	if state != nil {
		payload["state"] = maps.Clone(state)
	}
	return newEntry(KindAnchor, payload, meta)
}

// ToolCalls returns a tool_call entry {calls: [...]} holding the serialized
// tool calls.
func ToolCalls[C llm.ToolCall | map[string]any](calls []C, meta ...map[string]any) Entry {
	list := make([]any, 0, len(calls))
	for _, c := range calls {
		switch c := any(c).(type) {
		case llm.ToolCall:
			list = append(list, toMap(c))
		case map[string]any:
			list = append(list, maps.Clone(c))
		}
	}
	return newEntry(KindToolCall, map[string]any{"calls": list}, meta)
}

// ToolResults returns a tool_result entry {results: [...]}.
func ToolResults(results []any, meta ...map[string]any) Entry {
	list := append([]any{}, results...)
	return newEntry(KindToolResult, map[string]any{"results": list}, meta)
}

// ErrorEntry returns an error entry whose payload is err.AsMap().
func ErrorEntry(err *bub.Error, meta ...map[string]any) Entry {
	return newEntry(KindError, err.AsMap(), meta)
}

// Event returns an event entry {name} plus data when data is not nil.
func Event(name string, data map[string]any, meta ...map[string]any) Entry {
	payload := map[string]any{"name": name}
	if data != nil {
		payload["data"] = maps.Clone(data)
	}
	return newEntry(KindEvent, payload, meta)
}

// AnchorName returns the name of an anchor entry; ok is false for other
// kinds and for anchors without a string name.
func (e Entry) AnchorName() (name string, ok bool) {
	if e.Kind != KindAnchor {
		return "", false
	}
	name, ok = e.Payload["name"].(string)
	return name, ok
}

// InContext reports whether the entry may reach a model context: false only
// when its meta holds context exactly false.
func (e Entry) InContext() bool {
	v, ok := e.Meta["context"].(bool)
	return !ok || v
}

// StripMedia returns a copy of e without non-text content parts: when the
// payload has "content" (else "prompt") holding a list, only the parts whose
// type is "text" are kept. Images and audio never reach a tape (Bub's fork
// redaction); [Fork] applies it to every append.
func StripMedia(e Entry) Entry {
	key := "content"
	if _, ok := e.Payload[key]; !ok {
		key = "prompt"
	}
	parts, ok := e.Payload[key].([]any)
	if !ok {
		return e
	}
	kept := []any{}
	for _, p := range parts {
		if m, ok := p.(map[string]any); ok && m["type"] == "text" {
			kept = append(kept, p)
		}
	}
	e.Payload = maps.Clone(e.Payload)
	e.Payload[key] = kept
	return e
}

// toMap converts an llm value (a message, a tool call, a usage) into its
// JSON object form. Those types always encode, so a failure is a bug.
func toMap(v any) map[string]any {
	m, err := jsonValue(v)
	if err != nil {
		panic(fmt.Sprintf("tape: encoding %T: %v", v, err))
	}
	out, _ := m.(map[string]any)
	return out
}

// normalize returns a deep copy of e whose payload and meta hold JSON values
// only, with nil maps replaced by empty ones and a missing date set to now.
// Every store calls it on append so that all stores return the same types.
func normalize(e Entry) (Entry, error) {
	payload, err := jsonValue(e.Payload)
	if err != nil {
		return Entry{}, fmt.Errorf("normalizing %s payload: %w", e.Kind, err)
	}
	meta, err := jsonValue(e.Meta)
	if err != nil {
		return Entry{}, fmt.Errorf("normalizing %s meta: %w", e.Kind, err)
	}
	e.Payload, _ = payload.(map[string]any)
	if e.Payload == nil {
		e.Payload = map[string]any{}
	}
	e.Meta, _ = meta.(map[string]any)
	if e.Meta == nil {
		e.Meta = map[string]any{}
	}
	if e.Date == "" {
		e.Date = FormatDate(time.Now())
	}
	return e, nil
}

// Clone returns a deep copy of e, a stored (already normalized) entry:
// its payload and meta may be modified without changing e.
func (e Entry) Clone() Entry {
	e.Payload = cloneValue(e.Payload).(map[string]any)
	e.Meta = cloneValue(e.Meta).(map[string]any)
	return e
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = cloneValue(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = cloneValue(x)
		}
		return s
	}
	return v
}

// jsonValue converts v into the values encoding/json decodes into an any:
// map[string]any, []any, string, float64, bool and nil. Common Go types are
// converted directly; anything else goes through encoding/json.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool, float64:
		return v, nil
	case map[string]any:
		if v == nil {
			return nil, nil
		}
		m := make(map[string]any, len(v))
		for k, x := range v {
			jx, err := jsonValue(x)
			if err != nil {
				return nil, err
			}
			m[k] = jx
		}
		return m, nil
	case []any:
		if v == nil {
			return nil, nil
		}
		s := make([]any, len(v))
		for i, x := range v {
			jx, err := jsonValue(x)
			if err != nil {
				return nil, err
			}
			s[i] = jx
		}
		return s, nil
	case int:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case float32:
		return float64(v), nil
	case json.Number:
		return v.Float64()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}
