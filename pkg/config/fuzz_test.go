package config_test

import (
	"errors"
	"testing"

	"github.com/bubbus/bub/pkg/config"
)

// FuzzDecode: any bytes decode to a Config or a *DecodeError, never a
// panic, and encoding, re-decoding, the text forms and the env overlay of
// a decoded Config never panic either. (A re-decode may fail: a key such
// as "<<" means a merge when read back.)
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"model: openai:gpt-4o\napi_key: {openai: sk-x}\n",
		"telegram:\n  token: t\n  allow_users: [1, 2]\nenabled_channels: [cli]\n",
		"a: &x {b: [1, 2.5, true, null]}\nc: *x\n<<: {d: e}\n",
		"- a\n", "null", "", "a: [\n", "? [a]\n: b\n", "a: !!binary aGVsbG8=\n", "a: .inf\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Decode(data)
		if err != nil {
			var de *config.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode error %T %v, want a *DecodeError", err, err)
			}
			return
		}
		out, err := config.Marshal(c, "model")
		if err != nil {
			return // a decoded value YAML cannot encode again is reported, not a panic
		}
		_, _ = config.Decode(out)
		_ = c.String()
		_ = config.Env(c)
		_, _ = c.Get("a.b")
	})
}
