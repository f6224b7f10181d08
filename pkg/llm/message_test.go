package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/bubbus/bub/pkg/llm"
)

// A schema carrying its encoding encodes, and so do its copies, as it did
// when made (inside other values too); without one it encodes its fields.
func TestToolSchemaEncoded(t *testing.T) {
	s := llm.ToolSchema{Name: "fs_read", Description: "Read a <file> & more.", Parameters: map[string]any{
		"type": "object", "required": []any{"path"}, "properties": map[string]any{"path": map[string]any{"type": "string"}},
	}}
	plain, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"fs_read","description":"Read a \u003cfile\u003e \u0026 more.","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}}`
	if string(plain) != want {
		t.Fatalf("plain schema encodes as %s, want %s", plain, want)
	}
	enc := s.Encoded()
	copied := enc
	copied.Description = "changed after Encoded"
	for name, v := range map[string]any{"encoded": enc, "a copy of it": copied, "inside a slice": []llm.ToolSchema{enc}} {
		got, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if name == "inside a slice" {
			got = got[1 : len(got)-1]
		}
		if string(got) != want {
			t.Errorf("%s encodes as %s, want %s", name, got, want)
		}
	}
}
