package tape

import (
	"math"
	"slices"
	"strconv"

	"github.com/bubbus/bub/pkg/internal/jsonesc"
)

// This file renders JSON the way Bub's Python code does with
// json.dumps(v, ensure_ascii=False): separators ", " and ": ", non-ASCII
// characters kept, no HTML escaping. Object keys are sorted (Go maps have no
// insertion order), so the rendering of a value is canonical: encoding a
// decoded rendering gives the same bytes again.

// appendJSON appends the rendering of v, a normalized JSON value (see
// jsonValue), to b. Integer types are accepted for convenience; any other
// type is normalized first and rendered as null if that fails.
func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		return appendString(b, v)
	case float64:
		return appendFloat(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case map[string]any:
		b = append(b, '{')
		var small [16]string // an entry's maps are small: keys sorted without an allocation
		keys := small[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendString(b, k)
			b = append(b, ": "...)
			b = appendJSON(b, v[k])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendJSON(b, x)
		}
		return append(b, ']')
	}
	jv, err := jsonValue(v)
	if err != nil {
		return append(b, "null"...)
	}
	return appendJSON(b, jv)
}

// pyJSON returns the rendering of v as a string.
func pyJSON(v any) string { return string(appendJSON(nil, v)) }

// appendFloat formats like encoding/json: integral values without a
// fraction, exponent form only for very small or very large magnitudes.
// NaN and infinities, which JSON cannot hold, become null.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return jsonesc.AppendFloat(b, f)
}

// appendString quotes s like Python's json.dumps with ensure_ascii=False.
// Invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte { return jsonesc.Python.Append(b, s) }
