package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// This file decodes requests fast: an interceptor decodes one per call,
// and with encoding/json the generic turn state (a map of any) was most of
// its work. The envelope, the state and the inputs of before_tool_call
// (here) and of before_llm_call and after_llm_call (llmcodec.go) are
// parsed in one pass without reflection; other inputs go through
// encoding/json. Measured on 2026-12-01 (bench P2, quiet machine), this
// file and encode.go replaced by encoding/json took the hop/raw ratio from
// 1.15 to 1.26 at p50 (goal ≤ 1.25) and from 1.35 to 2.16 at p99 (goal ≤ 1.5);
// github.com/go-json-experiment/json for decoding did not close the gap.

// Object is a JSON object as map[string]any. It encodes like a map, and
// decodes into exactly what encoding/json produces for a map[string]any
// (float64 numbers, []any arrays, nested map[string]any objects, invalid
// UTF-8 replaced by U+FFFD, the last of duplicate keys winning), in one
// pass without reflection.
type Object map[string]any

// maxDepth bounds nesting like encoding/json does.
const maxDepth = 10000

var errSyntax = errors.New("remote: invalid JSON object")

// UnmarshalJSON decodes a JSON object or null (which leaves o nil).
func (o *Object) UnmarshalJSON(data []byte) error {
	p := parser{data: data}
	p.space()
	if p.literal("null") {
		*o = nil
		return p.end()
	}
	m, err := p.object(0)
	if err != nil {
		return err
	}
	*o = m
	return p.end()
}

// UnmarshalJSON decodes a request: the envelope and the state in one pass,
// and the input too when it is before_tool_call's, before_llm_call's or
// after_llm_call's (the hot paths); other inputs go through encoding/json.
// Member names match exactly (encoding/json would also accept other letter
// cases); unknown members are skipped. Call it directly rather than through json.Unmarshal, which
// would first scan the whole request once more.
func (r *Request[In]) UnmarshalJSON(data []byte) error {
	*r = Request[In]{}
	p := parser{data: data}
	if err := p.members(r.member); err != nil {
		return err
	}
	return p.end()
}

// member decodes the value of the request member key.
func (r *Request[In]) member(p *parser, key []byte) (err error) {
	switch string(key) {
	case "hook":
		var s string
		s, err = p.stringOrNull()
		r.Hook = hooks.Hook(s)
	case "run_id":
		r.RunID, err = p.stringOrNull()
	case "session_id":
		r.SessionID, err = p.stringOrNull()
	case "state":
		r.State, err = p.objectOrNull()
	case "input":
		if d, ok := any(&r.Input).(decoder); ok {
			return d.decode(p)
		}
		start := p.i
		if err := p.skip(0); err != nil {
			return err
		}
		if err := json.Unmarshal(p.data[start:p.i], &r.Input); err != nil {
			return fmt.Errorf("input: %w", err)
		}
	default:
		err = p.skip(0)
	}
	return err
}

// decoder is implemented by inputs that decode themselves in the parser's
// single pass.
type decoder interface {
	decode(p *parser) error
}

func (in *BeforeToolCallInput) decode(p *parser) error { return toolCallInputMembers.decode(p, in) }

var (
	toolCallInputMembers = members[BeforeToolCallInput]{
		"call": object(func(in *BeforeToolCallInput) *tools.Call { return &in.Call }, callMembers),
	}
	callMembers = members[tools.Call]{
		"run_id":    text(func(c *tools.Call) *string { return &c.RunID }),
		"tool":      text(func(c *tools.Call) *string { return &c.Tool }),
		"call_id":   text(func(c *tools.Call) *string { return &c.CallID }),
		"arguments": anyObject(func(c *tools.Call) *map[string]any { return &c.Arguments }),
	}
)

// members decodes an object into a T: each member with the decoder of its
// name, others skipped; null leaves the T as it is.
type members[T any] map[string]func(p *parser, v *T) error

func (m members[T]) decode(p *parser, v *T) error {
	return p.members(func(p *parser, key []byte) error {
		if f, ok := m[string(key)]; ok {
			return f(p, v)
		}
		return p.skip(0)
	})
}

// text decodes a string member (null is "").
func text[T any, S ~string](field func(*T) *S) func(*parser, *T) error {
	return func(p *parser, v *T) error {
		s, err := p.stringOrNull()
		*field(v) = S(s)
		return err
	}
}

// decodeString decodes a string element (null is "").
func decodeString(p *parser, s *string) (err error) {
	*s, err = p.stringOrNull()
	return err
}

// anyObject decodes a member that is any JSON object (null is nil).
func anyObject[T any](field func(*T) *map[string]any) func(*parser, *T) error {
	return func(p *parser, v *T) (err error) {
		*field(v), err = p.objectOrNull()
		return err
	}
}

// integer decodes an integer member (null is 0).
func integer[T any, N int | int64](field func(*T) *N) func(*parser, *T) error {
	return func(p *parser, v *T) error {
		n, err := p.integer()
		*field(v) = N(n)
		return err
	}
}

// object decodes an object member into the struct field points to.
func object[T, F any](field func(*T) *F, m members[F]) func(*parser, *T) error {
	return func(p *parser, v *T) error { return m.decode(p, field(v)) }
}

// nullable decodes an object member into a new F (null is nil).
func nullable[T, F any](field func(*T) **F, m members[F]) func(*parser, *T) error {
	return func(p *parser, v *T) error {
		dst := field(v)
		if p.literal("null") {
			*dst = nil
			return nil
		}
		*dst = new(F)
		return m.decode(p, *dst)
	}
}

// list decodes an array member of E (null is nil, [] an empty list), each
// element with each.
func list[T, E any](field func(*T) *[]E, each func(p *parser, e *E) error) func(*parser, *T) error {
	return func(p *parser, v *T) error {
		dst := field(v)
		if p.literal("null") {
			*dst = nil
			return nil
		}
		if p.i >= len(p.data) || p.data[p.i] != '[' {
			return errSyntax
		}
		out := []E{}
		err := p.elements(']', func([]byte) error {
			p.space()
			var e E
			err := each(p, &e)
			out = append(out, e)
			return err
		})
		*dst = out
		return err
	}
}

// members decodes the object (or null) at i, calling member with each
// member name (valid only during the call) once the parser is at its
// value.
func (p *parser) members(member func(p *parser, key []byte) error) error {
	p.space()
	if p.literal("null") {
		return nil
	}
	if p.i >= len(p.data) || p.data[p.i] != '{' {
		return errSyntax
	}
	return p.elements('}', func(key []byte) error {
		p.space()
		return member(p, key)
	})
}

// elements walks the object or array whose opening '{' or '[' is at i,
// up to its closing byte, calling each once per element with the parser
// at the element's value, which each must consume. For an object key is
// the member name (valid only during the call); for an array it is nil.
func (p *parser) elements(closing byte, each func(key []byte) error) error {
	p.i++
	p.space()
	if p.i < len(p.data) && p.data[p.i] == closing {
		p.i++
		return nil
	}
	for {
		var key []byte
		if closing == '}' {
			p.space()
			if p.i >= len(p.data) || p.data[p.i] != '"' {
				return errSyntax
			}
			var err error
			if key, err = p.bytes(); err != nil {
				return err
			}
			p.space()
			if p.i >= len(p.data) || p.data[p.i] != ':' {
				return errSyntax
			}
			p.i++
		}
		if err := each(key); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.data) {
			return errSyntax
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case closing:
			p.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// objectOrNull decodes an object; null is nil.
func (p *parser) objectOrNull() (map[string]any, error) {
	if p.literal("null") {
		return nil, nil
	}
	return p.object(0)
}

// stringOrNull decodes a string; null is "".
func (p *parser) stringOrNull() (string, error) {
	if p.literal("null") {
		return "", nil
	}
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return "", errSyntax
	}
	return p.string()
}

// skip checks the value at i and moves past it without decoding it.
func (p *parser) skip(depth int) error {
	p.space()
	if p.i >= len(p.data) {
		return errSyntax
	}
	switch c := p.data[p.i]; {
	case c == '{', c == '[':
		if depth++; depth > maxDepth {
			return errSyntax
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		return p.elements(closing, func([]byte) error { return p.skip(depth) })
	case c == '"':
		return p.skipString()
	case c == '-' || c >= '0' && c <= '9':
		return p.skipNumber()
	case p.literal("true"), p.literal("false"), p.literal("null"):
		return nil
	}
	return errSyntax
}

// skipString moves past the string at i (data[i] is '"').
func (p *parser) skipString() error {
	p.i++
	for p.i < len(p.data) {
		switch c := p.data[p.i]; {
		case c == '"':
			p.i++
			return nil
		case c < 0x20:
			return errSyntax
		case c == '\\':
			if _, err := p.escape(); err != nil {
				return err
			}
		default:
			p.i++
		}
	}
	return errSyntax
}

// parser decodes JSON values from data starting at i.
type parser struct {
	data []byte
	i    int
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// end checks that only whitespace follows.
func (p *parser) end() error {
	p.space()
	if p.i != len(p.data) {
		return errSyntax
	}
	return nil
}

// literal consumes lit if data continues with it.
func (p *parser) literal(lit string) bool {
	if len(p.data)-p.i >= len(lit) && string(p.data[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

func (p *parser) value(depth int) (any, error) {
	p.space()
	if p.i >= len(p.data) {
		return nil, errSyntax
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	}
	return nil, errSyntax
}

// object decodes an object; data[i] is '{'.
func (p *parser) object(depth int) (map[string]any, error) {
	if depth++; depth > maxDepth || p.i >= len(p.data) || p.data[p.i] != '{' {
		return nil, errSyntax
	}
	m := map[string]any{}
	err := p.elements('}', func(key []byte) error {
		v, err := p.value(depth)
		m[string(key)] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// array decodes an array; data[i] is '['.
func (p *parser) array(depth int) ([]any, error) {
	if depth++; depth > maxDepth {
		return nil, errSyntax
	}
	a := []any{}
	err := p.elements(']', func([]byte) error {
		v, err := p.value(depth)
		a = append(a, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// number decodes a number with JSON's grammar as a float64.
func (p *parser) number() (float64, error) {
	start := p.i
	if err := p.skipNumber(); err != nil {
		return 0, err
	}
	return strconv.ParseFloat(string(p.data[start:p.i]), 64) // out of range fails, as with encoding/json
}

// integer decodes a number into an int64 as encoding/json does: an
// integer literal in range; null is 0.
func (p *parser) integer() (int64, error) {
	if p.literal("null") {
		return 0, nil
	}
	start := p.i
	if p.i >= len(p.data) || p.data[p.i] != '-' && (p.data[p.i] < '0' || p.data[p.i] > '9') {
		return 0, errSyntax
	}
	if err := p.skipNumber(); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(p.data[start:p.i]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("remote: number %s is not an integer", p.data[start:p.i])
	}
	return n, nil
}

// skipNumber moves past the number at i, checking JSON's grammar.
func (p *parser) skipNumber() error {
	digits := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case digits() == 0:
		return errSyntax
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return errSyntax
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return errSyntax
		}
	}
	return nil
}

// string decodes a string; data[i] is '"'.
func (p *parser) string() (string, error) {
	b, err := p.bytes()
	return string(b), err
}

// bytes decodes a string; data[i] is '"'. Without escapes and non-ASCII
// bytes the result is a slice of data, which it does not copy.
func (p *parser) bytes() ([]byte, error) {
	p.i++
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return p.data[start : p.i-1], nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return p.slowString(start)
		}
		p.i++
	}
	return nil, errSyntax
}

// slowString decodes a string with escapes or non-ASCII bytes from start,
// the index after its opening quote, into a new slice.
func (p *parser) slowString(start int) ([]byte, error) {
	b := make([]byte, 0, p.i-start+16)
	b = append(b, p.data[start:p.i]...)
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return b, nil
		case c < 0x20:
			return nil, errSyntax
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return nil, err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			p.i += size
			b = utf8.AppendRune(b, r) // RuneError for invalid UTF-8, as encoding/json does
		}
	}
	return nil, errSyntax
}

// escape decodes the escape sequence at i (data[i] is '\\').
func (p *parser) escape() (rune, error) {
	if p.i+1 >= len(p.data) {
		return 0, errSyntax
	}
	c := p.data[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return 0, errSyntax
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		// A surrogate pair is one rune; a lone surrogate is U+FFFD.
		if len(p.data)-p.i >= 6 && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
			save := p.i
			p.i += 2
			if r2, ok := p.hex4(); ok {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					return dec, nil
				}
			}
			p.i = save
		}
		return utf8.RuneError, nil
	}
	return 0, errSyntax
}

// hex4 decodes four hex digits at i.
func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}
