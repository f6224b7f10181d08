package tools_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func TestDecodeArguments(t *testing.T) {
	tests := []struct {
		raw  string
		want map[string]any
	}{
		{raw: "", want: map[string]any{}},
		{raw: " \n", want: map[string]any{}},
		{raw: "{}", want: map[string]any{}},
		{raw: ` {"path": "a.txt", "n": 2, "x": null} `, want: map[string]any{"path": "a.txt", "n": 2.0, "x": nil}},
		{raw: `{"a":1,"a":2}`, want: map[string]any{"a": 2.0}},
		{raw: "[]"},
		{raw: "1"},
		{raw: `"{}"`},
		{raw: "null"},
		{raw: "{"},
		{raw: `{"a":1} x`},
		{raw: `{}{}`},
		{raw: "\xff"},
	}
	for _, tt := range tests {
		got, err := tools.DecodeArguments(tt.raw)
		if tt.want != nil {
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeArguments(%q) = %v, %v; want %v", tt.raw, got, err, tt.want)
			}
			continue
		}
		var be *bub.Error
		if !errors.As(err, &be) || be.Kind != bub.KindInvalidInput || be.Message != "Expected a function tool call with JSON object arguments." {
			t.Errorf("DecodeArguments(%q) error = %v", tt.raw, err)
		}
	}
}

// validated is a tool exercising every supported schema feature.
var validated = tools.Tool{
	Name:    "test.validate",
	Handler: noop,
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path":    map[string]any{"type": "string"},
			"offset":  map[string]any{"type": "integer", "default": 0},
			"ratio":   map[string]any{"type": "number"},
			"flag":    map[string]any{"type": "boolean", "default": false},
			"cwd":     map[string]any{"type": []any{"string", "null"}},
			"kinds":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "default": []any{"message", "tool_result"}},
			"headers": map[string]any{"type": "object"},
			"mode":    map[string]any{"type": "string", "enum": []any{"r", "w"}},
			"level":   map[string]any{"enum": []any{1, 2}},
			"any":     map[string]any{},
			"nested": map[string]any{
				"type":       "object",
				"properties": map[string]any{"n": map[string]any{"type": "integer"}},
				"required":   []any{"n"},
			},
		},
		"required": []any{"path"},
	},
}

func TestValidate(t *testing.T) {
	defaults := map[string]any{"offset": 0, "flag": false, "kinds": []any{"message", "tool_result"}}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{"path": "a"}
		for k, v := range defaults {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name string
		args map[string]any
		want map[string]any
	}{
		{name: "defaults", args: map[string]any{"path": "a"}, want: with(nil)},
		{name: "json numbers", args: map[string]any{"path": "a", "offset": 3.0, "ratio": 2.0}, want: with(map[string]any{"offset": 3, "ratio": 2.0})},
		{name: "go ints", args: map[string]any{"path": "a", "offset": int64(4), "ratio": 1}, want: with(map[string]any{"offset": 4, "ratio": 1.0})},
		{name: "lax strings", args: map[string]any{"path": "a", "offset": " 30 ", "ratio": "1.5", "flag": "Yes"}, want: with(map[string]any{"offset": 30, "ratio": 1.5, "flag": true})},
		{name: "bool from 0/1", args: map[string]any{"path": "a", "flag": 1.0}, want: with(map[string]any{"flag": true})},
		{name: "null optional is absent", args: map[string]any{"path": "a", "offset": nil, "cwd": nil}, want: with(nil)},
		{name: "nullable string", args: map[string]any{"path": "a", "cwd": "/tmp"}, want: with(map[string]any{"cwd": "/tmp"})},
		{name: "string slice", args: map[string]any{"path": "a", "kinds": []string{"event"}}, want: with(map[string]any{"kinds": []any{"event"}})},
		{name: "string map", args: map[string]any{"path": "a", "headers": map[string]string{"x": "y"}}, want: with(map[string]any{"headers": map[string]any{"x": "y"}})},
		{name: "free object keeps keys", args: map[string]any{"path": "a", "headers": map[string]any{"x": 1.0}}, want: with(map[string]any{"headers": map[string]any{"x": 1.0}})},
		{name: "enum", args: map[string]any{"path": "a", "mode": "w", "level": 2.0}, want: with(map[string]any{"mode": "w", "level": 2.0})},
		{name: "untyped", args: map[string]any{"path": "a", "any": []any{1.0}}, want: with(map[string]any{"any": []any{1.0}})},
		{name: "nested", args: map[string]any{"path": "a", "nested": map[string]any{"n": "7"}}, want: with(map[string]any{"nested": map[string]any{"n": 7}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tools.Validate(validated, tt.args)
			if err != nil {
				t.Fatalf("Validate: %v (%v)", err, bub.AsError(err).Details)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Validate =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want []string // "loc:type", in order
	}{
		{name: "missing", args: map[string]any{}, want: []string{"path:missing_argument"}},
		{name: "null required", args: map[string]any{"path": nil}, want: []string{"path:string_type"}},
		{name: "unexpected", args: map[string]any{"path": "a", "bogus": 1.0}, want: []string{"bogus:unexpected_keyword_argument"}},
		{name: "wrong string", args: map[string]any{"path": 1.0}, want: []string{"path:string_type"}},
		{name: "fraction", args: map[string]any{"path": "a", "offset": 1.5}, want: []string{"offset:int_from_float"}},
		{name: "bad int string", args: map[string]any{"path": "a", "offset": "x"}, want: []string{"offset:int_parsing"}},
		{name: "int type", args: map[string]any{"path": "a", "offset": true}, want: []string{"offset:int_type"}},
		{name: "huge", args: map[string]any{"path": "a", "offset": 1e300}, want: []string{"offset:int_type"}},
		{name: "number", args: map[string]any{"path": "a", "ratio": "NaN"}, want: []string{"ratio:float_parsing"}},
		{name: "number type", args: map[string]any{"path": "a", "ratio": []any{}}, want: []string{"ratio:float_type"}},
		{name: "bool", args: map[string]any{"path": "a", "flag": "maybe"}, want: []string{"flag:bool_parsing"}},
		{name: "bool type", args: map[string]any{"path": "a", "flag": 2.0}, want: []string{"flag:bool_type"}},
		{name: "list", args: map[string]any{"path": "a", "kinds": "message"}, want: []string{"kinds:list_type"}},
		{name: "list item", args: map[string]any{"path": "a", "kinds": []any{"ok", 3.0}}, want: []string{"kinds.1:string_type"}},
		{name: "dict", args: map[string]any{"path": "a", "headers": "x"}, want: []string{"headers:dict_type"}},
		{name: "enum", args: map[string]any{"path": "a", "mode": "x", "level": 3.0}, want: []string{"level:enum", "mode:enum"}},
		{name: "nested", args: map[string]any{"path": "a", "nested": map[string]any{"m": 1.0}}, want: []string{"nested.m:unexpected_keyword_argument", "nested.n:missing_argument"}},
		{name: "several sorted", args: map[string]any{"offset": "x", "zzz": 1.0}, want: []string{"offset:int_parsing", "zzz:unexpected_keyword_argument", "path:missing_argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tools.Validate(validated, tt.args)
			var be *bub.Error
			if !errors.As(err, &be) {
				t.Fatalf("Validate error = %v, want *bub.Error", err)
			}
			if be.Kind != bub.KindInvalidInput || be.Message != "Tool 'test_validate' argument validation failed." {
				t.Fatalf("error = %v", be)
			}
			if got := issueKeys(t, be); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("issues = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidateNoParametersRejectsArguments(t *testing.T) {
	tl := tools.Tool{Name: "help", Handler: noop}
	if _, err := tools.Validate(tl, map[string]any{}); err != nil {
		t.Fatalf("Validate(no args) = %v", err)
	}
	_, err := tools.Validate(tl, map[string]any{"x": "y"})
	if got := issueKeys(t, bub.AsError(err)); !reflect.DeepEqual(got, []string{"x:unexpected_keyword_argument"}) {
		t.Fatalf("issues = %v", got)
	}
}

func TestValidateDefaultsAreCopied(t *testing.T) {
	first, err := tools.Validate(validated, map[string]any{"path": "a"})
	if err != nil {
		t.Fatal(err)
	}
	first["kinds"].([]any)[0] = "mutated"
	second, err := tools.Validate(validated, map[string]any{"path": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := second["kinds"].([]any)[0]; got != "message" {
		t.Fatalf("default shared between calls: %v", got)
	}
}

func TestValidateErrorDetailsAreJSON(t *testing.T) {
	_, err := tools.Validate(validated, map[string]any{"offset": "x"})
	b, jerr := json.Marshal(bub.AsError(err).AsMap())
	if jerr != nil {
		t.Fatal(jerr)
	}
	want := `{"details":{"errors":[{"input":"x","loc":["offset"],"msg":"Input should be a valid integer, unable to parse string as an integer","type":"int_parsing"},{"loc":["path"],"msg":"Missing required argument","type":"missing_argument"}]},"kind":"invalid_input","message":"Tool 'test_validate' argument validation failed."}`
	if string(b) != want {
		t.Fatalf("error JSON =\n%s\nwant\n%s", b, want)
	}
}

func TestCoerce(t *testing.T) {
	got := tools.Coerce(validated.Parameters, map[string]string{
		"path":    "30",        // a string property keeps the string
		"offset":  "30",        // integer
		"ratio":   "0.5",       // number
		"flag":    "true",      // boolean
		"cwd":     "null",      // string first in the type list
		"kinds":   `["event"]`, // JSON array
		"headers": `{"a":"b"}`, // JSON object
		"nested":  `[1]`,       // not an object: stays a string
		"level":   "2",         // untyped: stays a string
		"unknown": "x",         // not declared: stays a string
		"mode":    "r",
	})
	want := map[string]any{
		"path": "30", "offset": 30, "ratio": 0.5, "flag": true, "cwd": "null",
		"kinds": []any{"event"}, "headers": map[string]any{"a": "b"}, "nested": "[1]",
		"level": "2", "unknown": "x", "mode": "r",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Coerce =\n%#v\nwant\n%#v", got, want)
	}
	if got := tools.Coerce(validated.Parameters, map[string]string{"offset": "ten"}); got["offset"] != "ten" {
		t.Fatalf("unconvertible value = %#v, want the string", got["offset"])
	}
}

// issueKeys returns "loc:type" for each issue, loc joined by ".".
func issueKeys(t *testing.T, be *bub.Error) []string {
	t.Helper()
	if be == nil {
		t.Fatal("no error")
	}
	issues, ok := be.Details["errors"].([]any)
	if !ok {
		t.Fatalf("details = %#v", be.Details)
	}
	var out []string
	for _, raw := range issues {
		issue := raw.(map[string]any)
		loc := ""
		for i, part := range issue["loc"].([]any) {
			if i > 0 {
				loc += "."
			}
			loc += jsonText(part)
		}
		out = append(out, loc+":"+issue["type"].(string))
	}
	return out
}

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
