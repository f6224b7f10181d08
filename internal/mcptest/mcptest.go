package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// EnvServe, set in a process's environment, makes [ServeIfChild] serve
// MCP over stdio instead of running the tests.
const EnvServe = "BUB_MCPTEST_SERVE"

// EnvProbe is the variable the has_env tool reports as set or not (it
// never returns its value).
const EnvProbe = "MCPTEST_TOKEN"

// envBlock names a file whose existence makes the stdio server exit at
// start (see [Block]).
const envBlock = "MCPTEST_BLOCK"

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type putIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type empty struct{}

// NewServer returns the test server: echo (read-only) answers
// "echo: <text>", pid (read-only) its process id, put (idempotent)
// "stored <key>", has_env (read-only) whether EnvProbe is set, and fail
// (no annotations) a tool error "boom".
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "put", Description: "Store a value.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in putIn) (*mcp.CallToolResult, any, error) {
			return text("stored " + in.Key), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "has_env", Description: "Whether " + EnvProbe + " is set.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatBool(os.Getenv(EnvProbe) != "")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("boom")
		})
	// odd's schema is outside the subset Bub's tool registry accepts.
	s.AddTool(&mcp.Tool{Name: "odd", Description: "A schema Bub refuses.", InputSchema: json.RawMessage(`{"type":"object","properties":{"f":{"type":"file"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("odd"), nil })
	return s
}

// ServeIfChild serves [NewServer] over stdio and exits when EnvServe is
// set; otherwise it returns at once. Call it first in TestMain.
func ServeIfChild() {
	if os.Getenv(EnvServe) == "" {
		return
	}
	if _, err := os.Stat(os.Getenv(envBlock)); err == nil {
		fmt.Fprintln(os.Stderr, "mcptest: blocked")
		os.Exit(1)
	}
	if err := NewServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Stdio returns the configuration of a stdio server named name that runs
// this test binary as [NewServer] (its TestMain must call
// [ServeIfChild]), with EnvProbe set to secret.
func Stdio(t testing.TB, name, secret string) mcptools.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	block := filepath.Join(t.TempDir(), "block")
	return mcptools.Server{Name: name, Command: exe, Env: map[string]string{EnvServe: "1", EnvProbe: secret, envBlock: block}}
}

// Block makes the stdio server s (from [Stdio]) fail to start from now
// on (on) or start again (off): a killed server then stays down until it
// is unblocked.
func Block(t testing.TB, s mcptools.Server, on bool) {
	t.Helper()
	path := s.Env[envBlock]
	if on {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// Kill SIGKILLs the stdio server whose pid tool answered pidText and
// returns its pid. Anything but the pid of another process fails the test
// (a pid of 0 or -1 would signal the test's whole process group).
func Kill(t testing.TB, pidText string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(pidText))
	if err != nil || pid <= 1 || pid == os.Getpid() {
		t.Fatalf("the pid tool answered %q, not the pid of a server process", pidText)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return pid
}

// HTTP is a streamable-HTTP MCP server on 127.0.0.1 that answers only
// requests carrying "Authorization: Bearer <token>" (401 otherwise). It can
// be stopped and restarted on the same address.
type HTTP struct {
	addr  string
	token string
	// mu guards srv.
	mu  sync.Mutex
	srv *http.Server
}

// StartHTTP serves [NewServer] over streamable HTTP until the test ends.
func StartHTTP(t testing.TB, token string) *HTTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &HTTP{addr: ln.Addr().String(), token: token}
	h.serve(ln)
	t.Cleanup(h.Stop)
	return h
}

// Server returns the client configuration of the server named name.
func (h *HTTP) Server(name string) mcptools.Server {
	return mcptools.Server{Name: name, URL: "http://" + h.addr + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + h.token}}
}

func (h *HTTP) serve(ln net.Listener) {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return NewServer() }, nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+h.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})}
	h.mu.Lock()
	h.srv = srv
	h.mu.Unlock()
	go func() { _ = srv.Serve(ln) }() // ends when Stop closes srv
}

// Stop closes the server and every connection to it, as a crash would.
func (h *HTTP) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv != nil {
		_ = h.srv.Close()
		h.srv = nil
	}
}

// Restart serves a fresh server (no sessions) on the same address.
func (h *HTTP) Restart(t testing.TB) {
	t.Helper()
	h.Stop()
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	h.serve(ln)
}
