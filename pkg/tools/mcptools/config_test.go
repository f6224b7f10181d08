package mcptools_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// The config file's mcp.servers reaches the environment overlay as
// BUB_MCP_SERVERS, and YAML numbers in env and args read as text.
func TestServersFromConfigFile(t *testing.T) {
	c, err := config.Decode([]byte(`
mcp:
  servers:
    files:
      command: mcp-files
      args: [--root, /srv, --port, 8080]
      env: {FILES_TOKEN: tok-123, PORT: 8080}
    search:
      url: https://mcp.example.com/mcp
      headers: {Authorization: Bearer sk-999}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := mcptools.ServersFromEnv(config.Getenv(func(string) string { return "" }, c))
	if err != nil {
		t.Fatal(err)
	}
	want := []mcptools.Server{
		{Name: "files", Command: "mcp-files", Args: []string{"--root", "/srv", "--port", "8080"}, Env: map[string]string{"FILES_TOKEN": "tok-123", "PORT": "8080"}},
		{Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer sk-999"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("servers = %#v, want %#v", got, want)
	}
	// The environment wins over the file, as for every setting.
	env := map[string]string{mcptools.EnvServers: `{"x": {"url": "http://127.0.0.1:9/mcp"}}`}
	got, err = mcptools.ServersFromEnv(config.Getenv(func(k string) string { return env[k] }, c))
	if err != nil || len(got) != 1 || got[0].Name != "x" {
		t.Errorf("env servers = %v, %v", got, err)
	}
}

func TestServerTextFormsHideSecrets(t *testing.T) {
	s := mcptools.Server{Name: "a", URL: "https://user:pw-secret@h.example/mcp", Headers: map[string]string{"Authorization": "Bearer hdr-secret"}}
	stdio := mcptools.Server{Name: "b", Command: "srv", Env: map[string]string{"TOKEN": "env-secret"}}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "server", s, "other", stdio)
	asJSON, err := json.Marshal([]mcptools.Server{s, stdio})
	if err != nil || !strings.Contains(string(asJSON), `"name":"a"`) {
		t.Fatalf("JSON %s, %v", asJSON, err)
	}
	for _, text := range []string{fmt.Sprint(s, stdio), fmt.Sprintf("%#v %+v", s, stdio), logged.String(), fmt.Sprint(s.Redacted(), stdio.Redacted()), string(asJSON)} {
		for _, secret := range []string{"pw-secret", "hdr-secret", "env-secret"} {
			if strings.Contains(text, secret) {
				t.Errorf("text form shows %q: %s", secret, text)
			}
		}
		if !strings.Contains(text, "Authorization") && !strings.Contains(text, "[redacted]") {
			t.Errorf("text form hides the header names too: %s", text)
		}
	}
	if r := stdio.Redacted(); r.Env["TOKEN"] != "[redacted]" || stdio.Env["TOKEN"] != "env-secret" {
		t.Errorf("Redacted = %v, original %v", r.Env, stdio.Env)
	}
}

func TestParseServersErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`[1]`, "want a JSON object"},
		{`{"a": {"command": "x", "url": "http://h/"}}`, "exclude each other"},
		{`{"a": {}}`, "set command (stdio) or url"},
		{`{"a b": {"command": "x"}}`, `server name "a b"`},
		{`{"a": {"url": "ftp://h/"}}`, "want an http:// or https:// URL"},
		{`{"a": {"url": "http://h/", "env": {"K": "v"}}}`, "args and env need command"},
		{`{"a": {"command": "x", "headers": {"K": "v"}}}`, "headers need url"},
		{`{"a": {"url": "http://h/", "headers": {"bad name": "v"}}}`, "not a valid HTTP field name"},
		{`{"a": {"command": "x", "env": {"K": {"nested": "secret-value"}}}}`, "want a string, number or boolean"},
		{`{"a": {"command": "x", "cmd": "y"}}`, `unknown field "cmd"`},
		{`{"a": {"command": "x", "env": {"=": "v"}}}`, "without '='"},
	} {
		_, err := mcptools.ParseServers([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseServers(%s) = %v, want %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("error shows a value: %v", err)
		}
	}
	if got, err := mcptools.ParseServers([]byte("  ")); got != nil || err != nil {
		t.Errorf("blank = %v, %v", got, err)
	}
}
