package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/bubbus/bub/pkg/bub"
)

// The JSON schema subset tools use: an object whose properties have a
// "type" (string, integer, number, boolean, array, object, null, or a list
// of these), optional "items" (arrays), "properties"/"required" (nested
// objects), "enum" and "default". Other keywords (description, minimum,
// anyOf, ...) are passed to the model untouched and not enforced.

var knownTypes = []string{"string", "integer", "number", "boolean", "array", "object", "null"}

// errNotObject is the message Bub gives for unusable tool-call arguments.
const errNotObject = "Expected a function tool call with JSON object arguments."

// DecodeArguments decodes a tool call's arguments as the model sends them:
// a JSON text that must be one object. A blank text means no arguments.
// Anything else yields a *bub.Error of kind invalid_input with Bub's
// message "Expected a function tool call with JSON object arguments.".
func DecodeArguments(raw string) (map[string]any, error) {
	if strings.TrimSpace(raw) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &bub.Error{Kind: bub.KindInvalidInput, Message: errNotObject, Details: map[string]any{"error": err.Error()}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &bub.Error{Kind: bub.KindInvalidInput, Message: errNotObject, Details: map[string]any{"error": "data after the JSON object"}}
	}
	args, ok := v.(map[string]any)
	if !ok {
		return nil, &bub.Error{Kind: bub.KindInvalidInput, Message: errNotObject}
	}
	return args, nil
}

// Validate checks args against t's parameter schema and returns a new map
// with defaults applied and values converted to their schema types (int,
// float64, bool, string, []any, map[string]any). Like Bub's lax validation
// it accepts numeric and boolean strings ("30", "true") and integral
// numbers for integers; a null optional argument counts as absent; an
// argument the schema does not declare is an error.
//
// A failure is a *bub.Error of kind invalid_input, "Tool '<name>' argument
// validation failed.", with details {"errors": [{loc, type, msg, input?}]}.
func Validate(t Tool, args map[string]any) (map[string]any, error) {
	var issues []any
	out := validateObject(t.Parameters, args, nil, true, &issues)
	if len(issues) > 0 {
		return nil, &bub.Error{
			Kind:    bub.KindInvalidInput,
			Message: fmt.Sprintf("Tool '%s' argument validation failed.", t.ModelName()),
			Details: map[string]any{"errors": issues},
		}
	}
	return out, nil
}

// Coerce converts comma-command values (always strings) to the types the
// schema params declares for them: "true" → true, "30" → 30, "1.5" → 1.5,
// JSON text for arrays and objects. A property that accepts strings keeps
// the string; a value that does not convert stays a string, so [Validate]
// reports it precisely.
func Coerce(params map[string]any, values map[string]string) map[string]any {
	props := properties(params)
	out := make(map[string]any, len(values))
	for k, s := range values {
		out[k] = coerceString(asMap(props[k]), s)
	}
	return out
}

func coerceString(schema map[string]any, s string) any {
	types := schemaTypes(schema)
	if slices.Contains(types, "string") {
		return s
	}
	for _, typ := range types {
		switch typ {
		case "array", "object":
			var v any
			if json.Unmarshal([]byte(s), &v) == nil && kindOf(v) == typ {
				return v
			}
		default:
			if v, ok := convertScalar(typ, s); ok {
				return v
			}
		}
	}
	return s
}

// validateObject validates args against an object schema. top marks the
// tool's own parameters, which reject undeclared arguments even when the
// schema declares no properties.
func validateObject(schema, args map[string]any, loc []any, top bool, issues *[]any) map[string]any {
	props := properties(schema)
	required := requiredNames(schema)
	strict := top || schema["properties"] != nil
	switch ap := schema["additionalProperties"].(type) {
	case bool:
		strict = !ap
	case map[string]any:
		strict = false
	}
	out := make(map[string]any, len(args)+len(props))
	for _, k := range slices.Sorted(maps.Keys(args)) {
		v := args[k]
		ps, known := props[k]
		switch {
		case !known && strict:
			addIssue(issues, at(loc, k), "unexpected_keyword_argument", "Unexpected keyword argument", v, true)
		case !known:
			out[k] = v
		case v == nil && !slices.Contains(required, k):
			// A null optional argument counts as absent.
		default:
			if cv, ok := validateValue(asMap(ps), v, at(loc, k), issues); ok {
				out[k] = cv
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if _, given := args[name]; given && args[name] != nil {
			continue
		}
		if slices.Contains(required, name) {
			if _, given := args[name]; !given {
				addIssue(issues, at(loc, name), "missing_argument", "Missing required argument", nil, false)
			}
			continue
		}
		if d := asMap(props[name])["default"]; d != nil {
			out[name] = copyValue(d)
		}
	}
	return out
}

// validateValue converts v to the first type of schema it fits and
// validates its elements; ok is false when it fits none (an issue is added).
func validateValue(schema map[string]any, v any, loc []any, issues *[]any) (any, bool) {
	types := schemaTypes(schema)
	out, ok := v, len(types) == 0
	for _, typ := range types {
		if ok {
			break
		}
		switch typ {
		case "array":
			var items []any
			if items, ok = listOf[any](v); ok {
				out = validateItems(asMap(schema["items"]), items, loc, issues)
			}
		case "object":
			var m map[string]any
			if m, ok = asObject(v); ok {
				out = validateObject(schema, m, loc, false, issues)
			}
		case "null":
			ok = v == nil
		default:
			out, ok = convertScalar(typ, v)
		}
	}
	if !ok {
		typ, msg := typeIssue(types[0], v)
		addIssue(issues, loc, typ, msg, v, true)
		return nil, false
	}
	if enum, has := listOf[any](schema["enum"]); has && !slices.ContainsFunc(enum, func(e any) bool { return sameValue(e, out) }) {
		addIssue(issues, loc, "enum", fmt.Sprintf("Input should be one of %s", enumText(enum)), v, true)
		return nil, false
	}
	return out, true
}

func validateItems(schema map[string]any, items []any, loc []any, issues *[]any) []any {
	out := make([]any, len(items))
	for i, item := range items {
		if cv, ok := validateValue(schema, item, at(loc, i), issues); ok {
			out[i] = cv
		}
	}
	return out
}

// convertScalar converts v to a string, integer, number or boolean with
// pydantic's lax rules. Unknown type names accept anything.
func convertScalar(typ string, v any) (any, bool) {
	switch typ {
	case "string":
		s, ok := v.(string)
		return s, ok
	case "integer":
		switch n := v.(type) {
		case int:
			return n, true
		case int64:
			return int(n), n >= math.MinInt && n <= math.MaxInt
		case float64:
			if n != math.Trunc(n) || n < math.MinInt64 || n >= math.MaxInt64 {
				return nil, false
			}
			return int(n), true
		case string:
			i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 0)
			return int(i), err == nil
		}
		return nil, false
	case "number":
		if f, ok := number(v); ok {
			return f, true
		}
		if n, ok := v.(string); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
			return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
		}
		return nil, false
	case "boolean":
		switch b := v.(type) {
		case bool:
			return b, true
		case int:
			return b == 1, b == 0 || b == 1
		case float64:
			return b == 1, b == 0 || b == 1
		case string:
			switch strings.ToLower(strings.TrimSpace(b)) {
			case "1", "on", "t", "true", "y", "yes":
				return true, true
			case "0", "off", "f", "false", "n", "no":
				return false, true
			}
		}
		return nil, false
	}
	return v, true
}

func typeIssue(typ string, v any) (string, string) {
	_, isString := v.(string)
	switch typ {
	case "string":
		return "string_type", "Input should be a valid string"
	case "integer":
		if f, ok := v.(float64); ok && f != math.Trunc(f) {
			return "int_from_float", "Input should be a valid integer, got a number with a fractional part"
		}
		if isString {
			return "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
		}
		return "int_type", "Input should be a valid integer"
	case "number":
		if isString {
			return "float_parsing", "Input should be a valid number, unable to parse string as a number"
		}
		return "float_type", "Input should be a valid number"
	case "boolean":
		if isString {
			return "bool_parsing", "Input should be a valid boolean, unable to interpret input"
		}
		return "bool_type", "Input should be a valid boolean"
	case "array":
		return "list_type", "Input should be a valid list"
	case "object":
		return "dict_type", "Input should be a valid dictionary"
	}
	return "none_required", "Input should be None"
}

func addIssue(issues *[]any, loc []any, typ, msg string, input any, hasInput bool) {
	issue := map[string]any{"loc": loc, "type": typ, "msg": msg}
	if hasInput {
		issue["input"] = input
	}
	*issues = append(*issues, issue)
}

// at returns loc extended by one element, never sharing loc's array.
func at(loc []any, elem any) []any { return append(slices.Clip(loc), elem) }

// checkSchema reports why schema is not an object schema of the subset.
func checkSchema(schema map[string]any) error {
	if schema == nil {
		return nil
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return fmt.Errorf("type must be \"object\", not %v", typ)
	}
	return checkProperty(schema)
}

func checkProperty(schema map[string]any) error {
	if typ, ok := schema["type"]; ok {
		list, ok := listOf[string](typ)
		if s, isString := typ.(string); isString {
			list, ok = []string{s}, true
		}
		if !ok || len(list) == 0 {
			return fmt.Errorf("type must be a string or a list of strings, not %v", typ)
		}
		for _, t := range list {
			if !slices.Contains(knownTypes, t) {
				return fmt.Errorf("unsupported type %q", t)
			}
		}
	}
	if raw, ok := schema["properties"]; ok {
		props, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("properties must be an object")
		}
		for _, name := range slices.Sorted(maps.Keys(props)) {
			sub, ok := props[name].(map[string]any)
			if !ok {
				return fmt.Errorf("property %q must be an object schema", name)
			}
			if err := checkProperty(sub); err != nil {
				return fmt.Errorf("property %q: %w", name, err)
			}
		}
	}
	if raw, ok := schema["required"]; ok {
		names, ok := listOf[string](raw)
		if !ok {
			return fmt.Errorf("required must be a list of strings")
		}
		for _, name := range names {
			if _, ok := properties(schema)[name]; !ok {
				return fmt.Errorf("required names unknown property %q", name)
			}
		}
	}
	if raw, ok := schema["items"]; ok {
		items, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("items must be an object schema")
		}
		if err := checkProperty(items); err != nil {
			return fmt.Errorf("items: %w", err)
		}
	}
	if raw, ok := schema["enum"]; ok {
		if _, ok := listOf[any](raw); !ok {
			return fmt.Errorf("enum must be a list")
		}
	}
	return nil
}

// properties returns the "properties" of an object schema (nil when absent).
func properties(schema map[string]any) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	return props
}

// requiredNames returns the "required" list of an object schema.
func requiredNames(schema map[string]any) []string {
	names, _ := listOf[string](schema["required"])
	return names
}

// schemaTypes returns the schema's "type" as a list.
func schemaTypes(schema map[string]any) []string {
	if s, ok := schema["type"].(string); ok {
		return []string{s}
	}
	types, _ := listOf[string](schema["type"])
	return types
}

// listOf returns v as a []T: v itself when it is one, else the elements
// of a []any or []string, when they are all Ts.
func listOf[T any](v any) ([]T, bool) {
	switch l := v.(type) {
	case []T:
		return l, true
	case []any:
		return elements[T](l)
	case []string:
		return elements[T](l)
	}
	return nil, false
}

// elements returns the elements of l as Ts; ok is false when one is not a
// T.
func elements[T, E any](l []E) (out []T, ok bool) {
	out = make([]T, len(l))
	for i, e := range l {
		if out[i], ok = any(e).(T); !ok {
			return nil, false
		}
	}
	return out, true
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asObject(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

// kindOf names the JSON kind of a decoded value ("array", "object", ...).
func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "scalar"
}

// copyValue deep-copies JSON-shaped values so a default is never shared
// between calls.
func copyValue(v any) any {
	switch c := v.(type) {
	case []any:
		out := make([]any, len(c))
		for i, e := range c {
			out[i] = copyValue(e)
		}
		return out
	case []string:
		return slices.Clone(c)
	case map[string]any:
		out := make(map[string]any, len(c))
		for k, e := range c {
			out[k] = copyValue(e)
		}
		return out
	}
	return v
}

// sameValue compares enum members, treating all numbers alike.
func sameValue(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func enumText(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		b, _ := json.Marshal(e)
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}
