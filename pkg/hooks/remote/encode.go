package remote

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/bubbus/bub/pkg/internal/jsonesc"
	"github.com/bubbus/bub/pkg/tools"
)

// This file encodes requests fast, the counterpart of object.go: the
// envelope, the state and the inputs of before_tool_call (here) and of
// before_llm_call and after_llm_call (llmcodec.go) are written without
// reflection; values of other types and other inputs go through
// encoding/json. The output is valid JSON that encoding/json decodes to
// the same values as its own encoding (HTML characters are not escaped).

// encoder is implemented by inputs that encode themselves.
type encoder interface {
	encode(b []byte) ([]byte, error)
}

// encodeRequest appends the JSON of r to b.
func encodeRequest[In any](b []byte, r *Request[In]) ([]byte, error) {
	b = append(b, `{"hook":`...)
	b = appendString(b, string(r.Hook))
	b = append(b, `,"run_id":`...)
	b = appendString(b, r.RunID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, r.SessionID)
	b = append(b, `,"state":`...)
	b, err := appendValue(b, map[string]any(r.State))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	b = append(b, `,"input":`...)
	if e, ok := any(&r.Input).(encoder); ok {
		b, err = e.encode(b)
	} else {
		var raw []byte
		raw, err = json.Marshal(r.Input)
		b = append(b, raw...)
	}
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return append(b, '}'), nil
}

func (in *BeforeToolCallInput) encode(b []byte) ([]byte, error) {
	b = append(b, `{"call":`...)
	b, err := appendCall(b, &in.Call)
	return append(b, '}'), err
}

// appendCall appends a tools.Call as encoding/json would.
func appendCall(b []byte, c *tools.Call) ([]byte, error) {
	b = append(b, `{"run_id":`...)
	b = appendString(b, c.RunID)
	b = append(b, `,"tool":`...)
	b = appendString(b, c.Tool)
	b = append(b, `,"arguments":`...)
	b, err := appendValue(b, c.Arguments)
	if err != nil {
		return nil, err
	}
	if c.CallID != "" {
		b = append(b, `,"call_id":`...)
		b = appendString(b, c.CallID)
	}
	return append(b, '}'), nil
}

// appendValue appends v: JSON values and the common Go scalars directly,
// anything else through encoding/json.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("unsupported number %v", v)
		}
		return jsonesc.AppendFloat(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		// Sorted keys, on the stack for the small maps a hop carries.
		keys := make([]string, 0, 8)
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}

// appendString appends s as a JSON string as encoding/json writes it
// (invalid UTF-8 as \ufffd), HTML characters unescaped.
func appendString(b []byte, s string) []byte { return jsonesc.Std.Append(b, s) }
