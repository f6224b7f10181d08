package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Context is an insertion-ordered string-keyed map (Bub's message context).
// Order matters: the context string lists keys in insertion order. The zero
// value is an empty context ready to use.
type Context struct {
	keys []string
	vals map[string]any
}

// NewContext returns a context holding the given key/value pairs in order.
func NewContext(kv ...any) *Context {
	c := &Context{}
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		c.Set(k, kv[i+1])
	}
	return c
}

// Len returns the number of keys.
func (c *Context) Len() int {
	if c == nil {
		return 0
	}
	return len(c.keys)
}

// Get returns the value of key.
func (c *Context) Get(key string) (any, bool) {
	if c == nil {
		return nil, false
	}
	v, ok := c.vals[key]
	return v, ok
}

// String returns the value of key when it is a string, else "".
func (c *Context) String(key string) string {
	v, _ := c.Get(key)
	s, _ := v.(string)
	return s
}

// Set stores value under key; a new key goes last, an existing key keeps
// its place.
func (c *Context) Set(key string, value any) {
	if c.vals == nil {
		c.vals = map[string]any{}
	}
	if _, ok := c.vals[key]; !ok {
		c.keys = append(c.keys, key)
	}
	c.vals[key] = value
}

// Keys returns the keys in insertion order.
func (c *Context) Keys() []string {
	if c == nil {
		return nil
	}
	return append([]string(nil), c.keys...)
}

// Clone returns an independent copy (values are shared).
func (c *Context) Clone() *Context {
	out := &Context{}
	if c == nil {
		return out
	}
	for _, k := range c.keys {
		out.Set(k, c.vals[k])
	}
	return out
}

// Map returns the context as a plain map.
func (c *Context) Map() map[string]any {
	m := make(map[string]any, c.Len())
	if c != nil {
		for _, k := range c.keys {
			m[k] = c.vals[k]
		}
	}
	return m
}

// Str is Bub's context_str: "key=value" pairs joined by "|" in insertion
// order, skipping keys that start with "_".
func (c *Context) Str() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, k := range c.keys {
		if strings.HasPrefix(k, "_") {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(valueString(c.vals[k]))
	}
	return b.String()
}

func valueString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

// MarshalJSON encodes the context as a JSON object in insertion order.
func (c *Context) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range c.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(c.vals[k])
		if err != nil {
			return nil, fmt.Errorf("context key %q: %w", k, err)
		}
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// errContextNotObject is returned when a context is not a JSON object.
var errContextNotObject = errors.New("context must be a JSON object")

// UnmarshalJSON decodes a JSON object keeping its key order; null gives an
// empty context.
func (c *Context) UnmarshalJSON(b []byte) error {
	*c = Context{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errContextNotObject
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		c.Set(key, normalizeNumbers(v))
	}
	_, err = dec.Token()
	return err
}

// normalizeNumbers turns json.Number into int64 when integral, else float64.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = normalizeNumbers(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = normalizeNumbers(x)
		}
		return v
	}
	return v
}
