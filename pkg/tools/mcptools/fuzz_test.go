package mcptools_test

import (
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// FuzzParseServers: any text parses to valid servers or an error, never a
// panic; what parses validates, and no text form of it shows an env or
// header value.
func FuzzParseServers(f *testing.F) {
	for _, s := range []string{
		`{"files": {"command": "mcp-files", "args": ["--root", 1], "env": {"TOKEN": "t0ken"}}}`,
		`{"web": {"url": "https://u:p@h/mcp", "headers": {"Authorization": "Bearer x"}}}`,
		`{"a": {}}`, `[]`, `null`, ``, `{"a": {"env": {"K": true}}}`, `{"a": 1}`, `{"": {"command": "x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, err := mcptools.ParseServers(data)
		if err != nil {
			return
		}
		for _, s := range servers {
			if err := s.Validate(); err != nil {
				t.Fatalf("parsed server does not validate: %v", err)
			}
			text := s.String()
			for _, m := range []map[string]string{s.Env, s.Headers} {
				for _, v := range m {
					if len(v) >= 8 && strings.Contains(text, v) && !strings.Contains(s.Name+s.Command+strings.Join(s.Args, " ")+s.URL, v) {
						t.Fatalf("String() %q shows the secret %q", text, v)
					}
				}
			}
		}
	})
}
