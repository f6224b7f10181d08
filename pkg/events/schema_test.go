package events_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// schemaSet is a tiny JSON Schema checker for the subset docs/events uses:
// $ref (within a file or to another file of the folder), type, properties,
// required, items, enum, const, pattern and minimum. It is strict where
// the schemas are lenient: an object whose schema lists properties must
// not have others, so a field added in Go but not in the schema fails.
// Any other validation keyword fails the check, so a schema cannot rely
// on something the checker ignores.
type schemaSet struct {
	docs map[string]map[string]any // by file name
	// shapeOnly skips the value rules (enum, const, pattern, minimum) and
	// checks only which fields exist and their types.
	shapeOnly bool
}

// valueRules are the keywords that constrain values rather than shape.
var valueRules = map[string]bool{"enum": true, "const": true, "pattern": true, "minimum": true}

// annotations are keywords the checker accepts and ignores.
var annotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "title": true, "description": true}

func loadSchemas(t *testing.T, dir string) *schemaSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in %s: %v", dir, err)
	}
	s := &schemaSet{docs: map[string]map[string]any{}}
	for _, f := range files {
		var doc map[string]any
		if err := json.Unmarshal(readFile(t, f), &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s.docs[filepath.Base(f)] = doc
	}
	return s
}

// validate checks the JSON document data against the schema in file.
func (s *schemaSet) validate(file string, data []byte) []error {
	doc, ok := s.docs[file]
	if !ok {
		return []error{fmt.Errorf("no schema %s", file)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []error{err}
	}
	var errs []error
	s.check(file, doc, v, "$", &errs)
	return errs
}

func (s *schemaSet) check(file string, sch map[string]any, v any, path string, errs *[]error) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	for kw, arg := range sch {
		if s.shapeOnly && valueRules[kw] {
			continue
		}
		switch kw {
		case "$ref":
			refFile, target, err := s.resolve(file, arg.(string))
			if err != nil {
				fail("%v", err)
				continue
			}
			s.check(refFile, target, v, path, errs)
		case "type":
			if !hasType(v, arg) {
				fail("%s is not of type %v", jsonKind(v), arg)
			}
		case "enum":
			if !slicesContainsJSON(arg.([]any), v) {
				fail("%v is not one of %v", v, arg)
			}
		case "const":
			if !equalJSON(arg, v) {
				fail("%v is not %v", v, arg)
			}
		case "pattern":
			if str, ok := v.(string); ok && !regexp.MustCompile(arg.(string)).MatchString(str) {
				fail("%q does not match %s", str, arg)
			}
		case "minimum":
			if n, ok := v.(json.Number); ok {
				f, _ := n.Float64()
				if f < arg.(float64) {
					fail("%v is below %v", n, arg)
				}
			}
		case "required":
			if obj, ok := v.(map[string]any); ok {
				for _, name := range arg.([]any) {
					if _, ok := obj[name.(string)]; !ok {
						fail("missing required %q", name)
					}
				}
			}
		case "properties":
			obj, ok := v.(map[string]any)
			if !ok {
				continue
			}
			props := arg.(map[string]any)
			for name, val := range obj {
				p, ok := props[name]
				if !ok {
					fail("property %q is not in the schema", name)
					continue
				}
				s.check(file, p.(map[string]any), val, path+"."+name, errs)
			}
		case "items":
			if arr, ok := v.([]any); ok {
				for i, el := range arr {
					s.check(file, arg.(map[string]any), el, fmt.Sprintf("%s[%d]", path, i), errs)
				}
			}
		default:
			if !annotations[kw] {
				fail("schema keyword %q is not supported by the checker", kw)
			}
		}
	}
}

// resolve follows a $ref: "other.schema.json#/$defs/x" or "#/$defs/x".
func (s *schemaSet) resolve(file, ref string) (string, map[string]any, error) {
	refFile, pointer, _ := strings.Cut(ref, "#")
	if refFile == "" {
		refFile = file
	}
	var node any = s.docs[refFile]
	if node == nil {
		return "", nil, fmt.Errorf("$ref %q: no schema %s", ref, refFile)
	}
	for tok := range strings.SplitSeq(strings.TrimPrefix(pointer, "/"), "/") {
		if tok == "" {
			continue
		}
		m, ok := node.(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("$ref %q: %q is not an object", ref, tok)
		}
		node = m[tok]
	}
	target, ok := node.(map[string]any)
	if !ok {
		return "", nil, fmt.Errorf("$ref %q does not resolve", ref)
	}
	return refFile, target, nil
}

func hasType(v, want any) bool {
	switch w := want.(type) {
	case string:
		return kindMatches(v, w)
	case []any:
		for _, t := range w {
			if kindMatches(v, t.(string)) {
				return true
			}
		}
	}
	return false
}

func kindMatches(v any, typ string) bool {
	if typ == "integer" {
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	}
	return jsonKind(v) == typ
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// equalJSON compares a schema value (decoded without UseNumber) with an
// instance value (decoded with it).
func equalJSON(schemaVal, v any) bool {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		return err == nil && reflect.DeepEqual(schemaVal, f)
	}
	return reflect.DeepEqual(schemaVal, v)
}

func slicesContainsJSON(list []any, v any) bool {
	for _, x := range list {
		if equalJSON(x, v) {
			return true
		}
	}
	return false
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSchemaChecker proves the checker rejects what it should, so a
// passing golden test means something.
func TestSchemaChecker(t *testing.T) {
	s := loadSchemas(t, docsDir)
	good := `{"step":1,"status":"ok","elapsed_ms":3,"error":{"kind":"tool","message":"m"}}`
	if errs := s.validate("step.finished.schema.json", []byte(good)); len(errs) > 0 {
		t.Fatalf("valid payload rejected: %v", errs)
	}
	bad := map[string]string{
		"missing required":  `{"step":1,"status":"ok"}`,
		"wrong type":        `{"step":"1","status":"ok","elapsed_ms":3}`,
		"not an integer":    `{"step":1.5,"status":"ok","elapsed_ms":3}`,
		"not in enum":       `{"step":1,"status":"done","elapsed_ms":3}`,
		"unknown property":  `{"step":1,"status":"ok","elapsed_ms":3,"extra":true}`,
		"bad $ref target":   `{"step":1,"status":"ok","elapsed_ms":3,"error":{"kind":"tool"}}`,
		"nested unknown":    `{"step":1,"status":"ok","elapsed_ms":3,"error":{"kind":"t","message":"m","x":1}}`,
		"not an object":     `[]`,
		"array item type":   `{"step":1,"status":"ok","elapsed_ms":3,"next_prompt":["x"]}`,
		"null not accepted": `{"step":null,"status":"ok","elapsed_ms":3}`,
	}
	for name, doc := range bad {
		if errs := s.validate("step.finished.schema.json", []byte(doc)); len(errs) == 0 {
			t.Errorf("%s: %s accepted", name, doc)
		}
	}
}
