package openai

import (
	"bytes"
	"testing"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// builtinCall is a call offering the builtin tools, as a frozen registry
// gives them (encoded once) when encoded is set.
func builtinCall(tb testing.TB, encoded bool) llm.Call {
	tb.Helper()
	sh, err := toolkit.NewShells()
	if err != nil {
		tb.Fatal(err)
	}
	reg := &tools.Registry{}
	if err := toolkit.Register(reg, toolkit.Options{Shells: sh}); err != nil {
		tb.Fatal(err)
	}
	schemas := reg.Schemas(reg.Usable())
	if encoded {
		reg.Freeze()
		schemas = reg.Schemas(reg.Usable())
	}
	return llm.Call{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hello")}}, Tools: schemas}
}

// TestEncodedToolsMakeTheSameBody: the request body is the same bytes
// whether the tools carry their encoding or not.
func TestEncodedToolsMakeTheSameBody(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := p.requestBody(builtinCall(t, false))
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := p.requestBody(builtinCall(t, true))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, encoded) || !bytes.Contains(plain, []byte(`"name":"fs_read"`)) {
		t.Fatalf("bodies differ or lack the tools:\n%s\n%s", plain, encoded)
	}
}

// BenchmarkRequestBody encodes the body of a call offering the builtin
// tools, as a worker's frozen registry offers them (encoded) and as a
// list made per call offers them (plain).
func BenchmarkRequestBody(b *testing.B) {
	p, err := New()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		encoded bool
	}{{"encoded", true}, {"plain", false}} {
		call := builtinCall(b, bc.encoded)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.requestBody(call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
