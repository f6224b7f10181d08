package jsonesc_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bubbus/bub/pkg/internal/jsonesc"
)

// tricky holds every character the options treat differently.
const tricky = "q\" b\\ n\n r\r t\t b\b f\f c\x01\x1f\x7f <&> é 😀 \u2028 bad \xff\xc3 end"

// TestAppend pins the escapings: the SDK's (jsoniter), encoding/json's and
// Python's, the
// latter as python3 -c 'import json; print(json.dumps(s, ensure_ascii=False))'
// prints it (for s with U+FFFD in place of the invalid bytes).
func TestAppend(t *testing.T) {
	for _, c := range []struct {
		name string
		o    jsonesc.Options
		want string
	}{
		{"sdk", jsonesc.SDK, `"q\" b\\ n\n r\r t\t b\u0008 f\u000c c\u0001\u001f` + "\x7f <&> é 😀 \u2028 bad \xff\xc3 end\""},
		{"std", jsonesc.Std, `"q\" b\\ n\n r\r t\t b\b f\f c\u0001\u001f` + "\x7f <&> é 😀 " + `\u2028 bad \ufffd\ufffd end"`},
		{"python", jsonesc.Python, `"q\" b\\ n\n r\r t\t b\b f\f c\u0001\u001f` + "\x7f <&> é 😀 \u2028 bad \ufffd\ufffd end\""},
	} {
		if got := string(c.o.Append([]byte("x"), tricky)); got != "x"+c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, "x"+c.want)
		}
	}
}

// FuzzAppend: with any options, the output is one JSON string that
// decodes to s (invalid UTF-8 read as U+FFFD per byte, as encoding/json
// reads it); with FixUTF8 it is valid UTF-8 itself; and Std writes
// exactly what encoding/json writes.
func FuzzAppend(f *testing.F) {
	f.Add(tricky, true, true)
	f.Add("\u2029\xe2\x80", false, true)
	f.Add("", false, false)
	f.Fuzz(func(t *testing.T, s string, shortBF, fixUTF8 bool) {
		o := jsonesc.Options{ShortBF: shortBF, FixUTF8: fixUTF8}
		out := o.Append(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		if want := string([]rune(s)); got != want {
			t.Fatalf("%q decodes to %q, want %q", out, got, want)
		}
		if fixUTF8 && !utf8.Valid(out) {
			t.Fatalf("%q: invalid UTF-8", out)
		}
		var std bytes.Buffer
		enc := json.NewEncoder(&std)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := string(jsonesc.Std.Append(nil, s)), strings.TrimSuffix(std.String(), "\n"); got != want {
			t.Fatalf("Std wrote %q, encoding/json %q", got, want)
		}
	})
}

// TestAppendFloat: the bytes encoding/json writes for a float64.
func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, -2, 0.5, 1.5e-9, 1e-7, 1e-6, 123456789, 1e20, 1e21, -3.25e300, 5e-324} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonesc.AppendFloat(nil, f); string(got) != string(want) {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}
