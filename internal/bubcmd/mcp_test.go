package bubcmd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/mcptest"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfChild() // the stdio MCP server of TestMCPList
	os.Exit(m.Run())
}

// `bub mcp list` connects to the configured servers and shows each one's
// state and tools with their effect classes; a server that cannot start
// is down with its reason; no env or header value shows.
func TestMCPList(t *testing.T) {
	h := mcptest.StartHTTP(t, "hdr-secret-42")
	servers := map[string]mcptools.Server{
		"local":  mcptest.Stdio(t, "local", "env-secret-42"),
		"remote": h.Server("remote"),
		"gone":   {Command: "/nonexistent/mcp-server"},
	}
	cfg := map[string]any{}
	for name, s := range servers {
		entry := map[string]any{}
		if s.URL != "" {
			entry["url"], entry["headers"] = s.URL, s.Headers
		} else {
			entry["command"], entry["env"] = s.Command, s.Env
		}
		cfg[name] = entry
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	getenv := func(k string) string {
		switch k {
		case "BUB_HOME":
			return home
		case mcptools.EnvServers:
			return string(data)
		}
		return ""
	}
	run := func(args ...string) string {
		t.Helper()
		root, err := bubcmd.NewBub(t.Context(), &bubcmd.Env{Env: service.Env{Getenv: getenv}})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		if err := root.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("bub %v: %v\n%s", args, err, out.String())
		}
		for _, secret := range []string{"hdr-secret-42", "env-secret-42"} {
			if strings.Contains(out.String(), secret) {
				t.Errorf("bub %v shows %q:\n%s", args, secret, out.String())
			}
		}
		return out.String()
	}
	text := run("mcp", "list")
	var lines []string // with runs of spaces as one
	for line := range strings.Lines(text) {
		lines = append(lines, strings.Join(strings.Fields(line), " "))
	}
	words := strings.Join(lines, "\n")
	for _, want := range []string{"gone (stdio /nonexistent/mcp-server): down\nerror: fork/exec /nonexistent/mcp-server: no such file or directory",
		"local (stdio ", "): connected\nmcp.local_echo read_only Echo the text.\nmcp.local_fail irreversible Always fails.",
		"remote (http " + h.Server("").URL + "): connected", "mcp.remote_put idempotent Store a value.",
		`mcp.remote_odd irreversible skipped: register tool "mcp.remote_odd": invalid tool: parameters: property "f": unsupported type "file"`} {
		if !strings.Contains(words, want) {
			t.Errorf("bub mcp list lacks %q:\n%s", want, text)
		}
	}
	var status []mcptools.ServerStatus
	if err := json.Unmarshal([]byte(run("mcp", "list", "--json")), &status); err != nil {
		t.Fatal(err)
	}
	if len(status) != 3 || status[1].Name != "local" || status[1].Tools[0].Effect == "" {
		t.Errorf("bub mcp list --json: %+v", status)
	}
}
