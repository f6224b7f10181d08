package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
)

// FileName is the name of the configuration file in the bub home.
const FileName = "config.yaml"

// MaxFileSize bounds the configuration file [Load] reads.
const MaxFileSize = 1 << 20

// maxNodes bounds the values a decoded file may expand to (aliases can
// repeat a large map many times).
const maxNodes = 100_000

// Config is a configuration: top-level keys mapped to strings, numbers,
// booleans, lists and nested maps, as YAML decodes them. The nil Config is
// empty. Every text form of a Config (fmt verbs, slog) shows it
// [Config.Redacted].
type Config map[string]any

// Path returns the configuration file of the bub home: <home>/config.yaml.
func Path(home string) string { return filepath.Join(home, FileName) }

// DecodeError is a configuration file that is not valid YAML or not a
// mapping at the top level.
type DecodeError struct {
	// Path is the file, "" when the bytes came from elsewhere.
	Path string
	// Line and Column locate the error (1-based); 0 when unknown.
	Line, Column int
	// Msg says what is wrong, without the source excerpt.
	Msg string
}

// Error returns "<path>:<line>:<column>: <msg>" (the parts that are known).
func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString("config ")
	if e.Path != "" {
		b.WriteString(e.Path)
	} else {
		b.WriteString("input")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads the configuration file at path. A missing file is an empty
// configuration; a file that is not a YAML mapping is a [*DecodeError]
// naming the file and line.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, &DecodeError{Path: path, Msg: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	c, err := Decode(data)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Path = path
		}
		return nil, err
	}
	return c, nil
}

// Decode parses a configuration from YAML. Empty input and a document
// that is null are the empty configuration; anything but a mapping at the
// top level is an error. Scalar map keys (`1: x`) become their text; a
// list or map as a key is an error.
func Decode(data []byte) (c Config, err error) {
	var v any
	if err := yaml.UnmarshalWithOptions(data, &v); err != nil {
		de := &DecodeError{Msg: err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			de.Msg = ye.GetMessage()
			if t := ye.GetToken(); t != nil && t.Position != nil {
				de.Line, de.Column = t.Position.Line, t.Position.Column
			}
		}
		return nil, de
	}
	budget := maxNodes
	n, err := normalize(v, &budget)
	if err != nil {
		return nil, &DecodeError{Msg: err.Error()}
	}
	switch n := n.(type) {
	case nil:
		return Config{}, nil
	case map[string]any:
		return Config(n), nil
	}
	return nil, &DecodeError{Msg: fmt.Sprintf("the top level is a %s, want a mapping of keys to values", kind(n))}
}

// normalize deep-copies a decoded YAML value (the decoder shares one value
// among an anchor's aliases), spending one unit of budget per value.
func normalize(v any, budget *int) (any, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("more than %d values (aliases expanding too far?)", maxNodes)
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			n, err := normalize(x, budget)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			n, err := normalize(x, budget)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	return v, nil
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any, Config:
		return "mapping"
	case []any, []string:
		return "list"
	}
	return fmt.Sprintf("scalar (%v)", v)
}

// Save writes c to path as YAML with mode 0600, creating the directory
// (0700) when needed. It writes a temporary file in the same directory and
// renames it over path, so a reader sees the old file or the new one,
// never a part, and the result is 0600 whatever the old file's mode was.
// Keys named in order (dotted paths, e.g. the onboarding questions' keys
// in the order they were asked) come first in that order, at every level;
// the rest follow sorted.
func Save(path string, c Config, order ...string) error {
	data, err := Marshal(c, order...)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("saving config: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("saving config: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing to remove
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("saving config %s: %w", path, err)
	}
	return nil
}

// Marshal encodes c as YAML with the key order of [Save].
func Marshal(c Config, order ...string) ([]byte, error) {
	rank := map[string]int{}
	for i, p := range order {
		for {
			if _, ok := rank[p]; !ok {
				rank[p] = i
			}
			j := strings.LastIndexByte(p, '.')
			if j < 0 {
				break
			}
			p = p[:j]
		}
	}
	if len(c) == 0 {
		return []byte("{}\n"), nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf, yaml.Indent(2), yaml.IndentSequence(true))
	if err := enc.Encode(ordered(map[string]any(c), "", rank)); err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	return buf.Bytes(), nil
}

// ordered turns maps into yaml.MapSlices in rank order, then sorted.
func ordered(v any, path string, rank map[string]int) any {
	switch v := v.(type) {
	case Config:
		return ordered(map[string]any(v), path, rank)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		r := func(k string) int {
			if i, ok := rank[join(path, k)]; ok {
				return i
			}
			return len(rank) + 1
		}
		slices.SortFunc(keys, func(a, b string) int {
			if d := r(a) - r(b); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		out := make(yaml.MapSlice, len(keys))
		for i, k := range keys {
			out[i] = yaml.MapItem{Key: k, Value: ordered(v[k], join(path, k), rank)}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = ordered(x, path, rank)
		}
		return out
	}
	return v
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Merge merges src into dst recursively and returns dst (a new map when
// dst is nil): where both hold a map the maps merge, otherwise the value
// of src replaces dst's. What is taken from src is deep-copied, so later
// changes to src never show in dst. This is Bub's config merge
// (onboarding fragments merge with it).
func Merge(dst, src Config) Config {
	if dst == nil {
		dst = Config{}
	}
	for k, v := range src {
		if sm, ok := asMap(v); ok {
			if dm, ok := asMap(dst[k]); ok && dm != nil {
				Merge(dm, sm)
				continue
			}
		}
		dst[k] = Clone(v)
	}
	return dst
}

func asMap(v any) (Config, bool) {
	switch v := v.(type) {
	case map[string]any:
		return v, true
	case Config:
		return v, true
	}
	return nil, false
}

// Clone deep-copies a configuration value: maps and lists are copied,
// scalars returned as they are.
func Clone[T any](v T) T {
	out, _ := clone(v).(T)
	return out
}

func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = clone(x)
		}
		return out
	case Config:
		return Config(clone(map[string]any(v)).(map[string]any))
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = clone(x)
		}
		return out
	case []string:
		return slices.Clone(v)
	}
	return v
}

// Get returns the value at a dotted path ("telegram.token"), descending
// into maps; false when some part of the path is missing.
func (c Config) Get(dotted string) (any, bool) {
	if dotted == "" {
		return nil, false
	}
	var cur any = c
	for part := range strings.SplitSeq(dotted, ".") {
		m, ok := asMap(cur)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// redacted replaces the value of a secret key in every text form.
const redacted = "[redacted]"

// secretWords are the key names (or parts of names) whose values are
// never printed.
var secretWords = []string{"api_key", "apikey", "token", "password", "secret"}

// secretMaps are the key names whose every value is secret: maps of
// environment variables and of HTTP headers carry credentials (an MCP
// server's `env` and `headers`).
var secretMaps = []string{"env", "headers"}

// IsSecretKey reports whether a key's values are secret: its name contains
// api_key, token, password or secret, or is env or headers (any case, '-'
// read as '_').
func IsSecretKey(key string) bool {
	k := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	if slices.Contains(secretMaps, k) {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// Redacted returns a deep copy of c in which every value under a secret
// key (see [IsSecretKey]) that is not empty is "[redacted]"; maps under a
// secret key keep their keys (`api_key: {openai: "[redacted]"}`).
func (c Config) Redacted() Config {
	out, _ := redact(map[string]any(c), false).(map[string]any)
	return out
}

func redact(v any, secret bool) any {
	switch v := v.(type) {
	case Config:
		return redact(map[string]any(v), secret)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = redact(x, secret || IsSecretKey(k))
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = redact(x, secret)
		}
		return out
	case nil:
		return nil
	case string:
		if secret && v != "" {
			return redacted
		}
		return v
	}
	if secret {
		return redacted
	}
	return v
}

// String returns the redacted configuration as YAML.
func (c Config) String() string {
	data, err := Marshal(c.Redacted())
	if err != nil {
		return "config: " + err.Error()
	}
	return string(bytes.TrimRight(data, "\n"))
}

// Format prints [Config.String] for every fmt verb, so not even %#v shows
// a secret.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue implements [slog.LogValuer]: the redacted configuration as
// nested groups.
func (c Config) LogValue() slog.Value { return logValue(map[string]any(c.Redacted())) }

func logValue(v any) slog.Value {
	m, ok := v.(map[string]any)
	if !ok {
		return slog.AnyValue(v)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, len(keys))
	for i, k := range keys {
		attrs[i] = slog.Attr{Key: k, Value: logValue(m[k])}
	}
	return slog.GroupValue(attrs...)
}
