package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/mcptest"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfChild()
	os.Exit(m.Run())
}

const (
	stdioSecret = "stdio-secret-4711"
	httpSecret  = "http-secret-0815"
)

// start runs a manager of servers until the test ends, logging to log.
// Reconnections wait at least half a second, so a call right after a
// server died finds it down.
func start(t *testing.T, log *proctest.Buffer, servers ...mcptools.Server) (*mcptools.Manager, *tools.Registry) {
	t.Helper()
	m, err := mcptools.New(servers, mcptools.Options{
		Log:        slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, st := range m.Status() {
			if st.State != mcptools.StateStopped {
				t.Errorf("server %s after Close: %s", st.Name, st.State)
			}
		}
	})
	reg := &tools.Registry{}
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func call(t *testing.T, reg *tools.Registry, name string, args map[string]any) (any, *bub.Error) {
	t.Helper()
	tl, ok := reg.Get(name)
	if !ok {
		t.Fatalf("no tool %s; have %v", name, reg.ModelNames())
	}
	return tools.Invoke(t.Context(), tl, nil, args)
}

func servers(t *testing.T) (*mcptest.HTTP, []mcptools.Server) {
	h := mcptest.StartHTTP(t, httpSecret)
	return h, []mcptools.Server{mcptest.Stdio(t, "local", stdioSecret), h.Server("remote")}
}

// Both transports: each server's tools are registered as
// mcp.<server>_<tool> with their schemas and effect classes, and calls
// reach the server (the stdio server got its env, the HTTP one its
// Authorization header).
func TestToolsOverStdioAndHTTP(t *testing.T) {
	var log proctest.Buffer
	_, all := servers(t)
	m, reg := start(t, &log, all...)
	for _, srv := range []string{"local", "remote"} {
		t.Run(srv, func(t *testing.T) {
			echo, ok := reg.Lookup("mcp_" + srv + "_echo")
			if !ok {
				t.Fatalf("model name mcp_%s_echo not found in %v", srv, reg.ModelNames())
			}
			if echo.Name != "mcp."+srv+"_echo" || echo.Description != "Echo the text." {
				t.Errorf("tool %q %q", echo.Name, echo.Description)
			}
			props, _ := echo.Parameters["properties"].(map[string]any)
			if text, _ := props["text"].(map[string]any); text["type"] != "string" || text["description"] != "the text to echo" {
				t.Errorf("echo schema %v", echo.Parameters)
			}
			for tool, want := range map[string]tools.Effect{"echo": tools.EffectReadOnly, "put": tools.EffectIdempotent, "fail": tools.EffectIrreversible} {
				if tl, _ := reg.Get("mcp." + srv + "_" + tool); tl.Effect != want {
					t.Errorf("%s effect %q, want %q", tool, tl.Effect, want)
				}
			}
			if out, err := call(t, reg, "mcp."+srv+"_echo", map[string]any{"text": "hi"}); err != nil || out != "echo: hi" {
				t.Errorf("echo = %v, %v", out, err)
			}
			_, err := call(t, reg, "mcp."+srv+"_fail", nil)
			if err == nil || err.Kind != bub.KindTool || !strings.Contains(fmt.Sprint(err.Details["error"]), `mcp server "`+srv+`": boom`) {
				t.Errorf("fail = %v %v, want a tool error with the server's message", err, err.Details)
			}
			if _, err := call(t, reg, "mcp."+srv+"_echo", map[string]any{"text": 1, "extra": true}); err == nil || err.Kind != bub.KindInvalidInput {
				t.Errorf("bad arguments = %v, want invalid_input before the server is called", err)
			}
		})
	}
	if out, err := call(t, reg, "mcp.local_has_env", nil); err != nil || out != "true" {
		t.Errorf("stdio server env: has_env = %v, %v", out, err)
	}
	// Short env values ("1") are no secrets to cut out of every text.
	if out, err := call(t, reg, "mcp.local_echo", map[string]any{"text": "1 + 1"}); err != nil || out != "echo: 1 + 1" {
		t.Errorf("echo = %v, %v", out, err)
	}
	// A server that hands back one of its secrets does not get it to the model.
	if out, err := call(t, reg, "mcp.remote_echo", map[string]any{"text": "Bearer " + httpSecret}); err != nil || out != "echo: [redacted]" {
		t.Errorf("echo of the header value = %v, %v; want it redacted", out, err)
	}
	// A tool whose schema the registry refuses is skipped, with the reason.
	if _, ok := reg.Get("mcp.local_odd"); ok {
		t.Error("mcp.local_odd was registered")
	}
	status, _ := json.Marshal(m.Status())
	for _, want := range []string{`"name":"local"`, `"transport":"stdio"`, `"state":"connected"`, `"name":"mcp.remote_put","mcp_name":"put","effect":"idempotent"`,
		`"name":"mcp.local_odd","mcp_name":"odd","effect":"irreversible","skipped":"register tool \"mcp.local_odd\": invalid tool: parameters: property \"f\": unsupported type \"file\""`} {
		if !strings.Contains(string(status), want) {
			t.Errorf("status lacks %s: %s", want, status)
		}
	}
	assertNoSecret(t, "status", string(status))
	assertNoSecret(t, "log", log.String())
}

func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{stdioSecret, httpSecret} {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, text)
		}
	}
}

// Killing the stdio server's process: a call is a temporary tool error
// naming the server, the supervisor restarts the process, and the tool
// works again on a new process.
func TestStdioServerKilledRecovers(t *testing.T) {
	var log proctest.Buffer
	m, reg := start(t, &log, mcptest.Stdio(t, "local", stdioSecret))
	out, err := call(t, reg, "mcp.local_pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := mcptest.Kill(t, fmt.Sprint(out))
	_, cerr := call(t, reg, "mcp.local_echo", map[string]any{"text": "x"})
	if cerr == nil || cerr.Kind != bub.KindTemporary || !strings.Contains(cerr.Message, "MCP server 'local' is unavailable") {
		t.Fatalf("call to a killed server = %v, want a temporary error naming the server", cerr)
	}
	recovered(t, m, reg, "local", 2)
	out, err = call(t, reg, "mcp.local_pid", nil)
	if err != nil || out == strconv.Itoa(pid) {
		t.Errorf("pid after restart = %v, %v; want a new process than %d", out, err, pid)
	}
	assertNoSecret(t, "log", log.String())
}

// recovered waits until server is connected for the connects-th time and
// its echo answers.
func recovered(t *testing.T, m *mcptools.Manager, reg *tools.Registry, server string, connects int) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() (bool, string) {
		for _, st := range m.Status() {
			if st.Name == server && (st.State != mcptools.StateConnected || st.Connects < connects) {
				return false, fmt.Sprintf("%s: %s after %d connects (%s)", server, st.State, st.Connects, st.Error)
			}
		}
		return true, ""
	})
	if out, err := call(t, reg, "mcp."+server+"_echo", map[string]any{"text": "back"}); err != nil || out != "echo: back" {
		t.Errorf("echo after recovery = %v, %v", out, err)
	}
}

// Stopping the HTTP server: a call is a temporary tool error naming the
// server; once it is back (a new server on the same address, which knows
// no session), the client reconnects and the tool works again.
func TestHTTPServerDownRecovers(t *testing.T) {
	var log proctest.Buffer
	h := mcptest.StartHTTP(t, httpSecret)
	m, reg := start(t, &log, h.Server("remote"))
	h.Stop()
	_, err := call(t, reg, "mcp.remote_echo", map[string]any{"text": "x"})
	if err == nil || err.Kind != bub.KindTemporary || !strings.Contains(err.Message, "MCP server 'remote' is unavailable") {
		t.Fatalf("call to a stopped server = %v %v, want a temporary error naming the server", err, err.Details)
	}
	if st := m.Status()[0]; st.State != mcptools.StateDown || st.Error == "" {
		t.Errorf("status after a failed call: %+v, want down with a reason", st)
	}
	h.Restart(t)
	recovered(t, m, reg, "remote", 2)
	assertNoSecret(t, "log", log.String())
	assertNoSecret(t, "error", err.Error())
}

// A server that cannot start is down, reported with a reason, contributes
// no tools, and does not keep the others from working.
func TestUnreachableServer(t *testing.T) {
	var log proctest.Buffer
	bad := mcptools.Server{Name: "broken", Command: "/nonexistent/mcp-server", Env: map[string]string{"TOKEN": stdioSecret}}
	m, reg := start(t, &log, bad, mcptest.Stdio(t, "local", stdioSecret))
	st := m.Status()
	if st[0].Name != "broken" || st[0].State != mcptools.StateDown || !strings.Contains(st[0].Error, "/nonexistent/mcp-server") || len(st[0].Tools) != 0 {
		t.Errorf("broken server status %+v", st[0])
	}
	if st[1].State != mcptools.StateConnected {
		t.Errorf("local server status %+v", st[1])
	}
	for _, name := range reg.ModelNames() {
		if strings.HasPrefix(name, "mcp_broken_") {
			t.Errorf("registered %s of a server that never connected", name)
		}
	}
	assertNoSecret(t, "log", log.String())
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []mcptools.Server
		want    string
	}{
		{"duplicate", []mcptools.Server{{Name: "a", Command: "x"}, {Name: "a", URL: "http://h/"}}, "configured twice"},
		{"invalid", []mcptools.Server{{Name: "a"}}, "set command"},
	} {
		if _, err := mcptools.New(tc.servers, mcptools.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want %q", tc.name, err, tc.want)
		}
	}
	m, err := mcptools.New(nil, mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}
	if err := m.Close(t.Context()); err != nil {
		t.Error(err)
	}
	if !errors.Is(m.Register(frozen()), nil) {
		t.Error("Register of no tools failed")
	}
}

func frozen() *tools.Registry {
	reg := &tools.Registry{}
	reg.Freeze()
	return reg
}
