package toolkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

// waitLimit bounds every wait on a condition in these tests.
const waitLimit = 10 * time.Second

// env is a registry with the builtin tools over a fresh Shells manager.
type env struct {
	reg    *tools.Registry
	shells *Shells
	ws     string
	quits  []string
	mu     sync.Mutex // guards quits
}

func newEnv(t *testing.T, opts ...ShellsOption) *env {
	t.Helper()
	shells, err := NewShells(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shells.Close() })
	e := &env{reg: &tools.Registry{}, shells: shells, ws: t.TempDir()}
	err = Register(e.reg, Options{Shells: shells, Quit: func(_ context.Context, session string) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.quits = append(e.quits, session)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// tc returns a tool context for session in the env's workspace.
func (e *env) tc(session string) *tools.Context {
	return &tools.Context{SessionID: session, Workspace: e.ws}
}

func (e *env) call(ctx context.Context, t *testing.T, name string, tc *tools.Context, args map[string]any) (any, *bub.Error) {
	t.Helper()
	tl, ok := e.reg.Get(name)
	if !ok {
		t.Fatalf("tool %s is not registered", name)
	}
	return tools.Invoke(ctx, tl, tc, args)
}

// run calls a tool that must succeed and returns its text.
func (e *env) run(t *testing.T, name string, tc *tools.Context, args map[string]any) string {
	t.Helper()
	res, err := e.call(t.Context(), t, name, tc, args)
	if err != nil {
		t.Fatalf("%s(%v): %v %v", name, args, err, err.Details)
	}
	return res.(string)
}

var startedRE = regexp.MustCompile(`^started: (bash-[0-9a-f]{8})$`)

// background starts cmd in the background and returns its shell.
func (e *env) background(t *testing.T, session, cmd string) *shell {
	t.Helper()
	out := e.run(t, "bash", e.tc(session), map[string]any{"cmd": cmd, "background": true})
	m := startedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("bash background = %q", out)
	}
	sh, err := e.shells.get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// waitFor waits until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval of a deadline-bound wait
	}
}

func waitExited(t *testing.T, sh *shell) {
	t.Helper()
	select {
	case <-sh.exited:
	case <-time.After(waitLimit):
		t.Fatalf("shell %s did not exit", sh.id)
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestBashForeground(t *testing.T) {
	e := newEnv(t)
	if err := os.Mkdir(filepath.Join(e.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "stdout and stderr in order", args: map[string]any{"cmd": "echo out; echo err >&2; echo last"}, want: "out\nerr\nlast"},
		{name: "trimmed", args: map[string]any{"cmd": "printf '\\n  hi  \\n\\n'"}, want: "hi"},
		{name: "no output", args: map[string]any{"cmd": "true"}, want: "(no output)"},
		{name: "workspace is the default cwd", args: map[string]any{"cmd": "pwd"}, want: e.ws},
		{name: "relative cwd", args: map[string]any{"cmd": "pwd", "cwd": "sub"}, want: filepath.Join(e.ws, "sub")},
		{name: "absolute cwd", args: map[string]any{"cmd": "pwd", "cwd": "/"}, want: "/"},
		{name: "command string arguments", args: map[string]any{"cmd": "echo $((6*7))", "timeout_seconds": "5", "background": "false"}, want: "42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.run(t, "bash", e.tc("s"), tt.args); got != tt.want {
				t.Fatalf("bash = %q, want %q", got, tt.want)
			}
		})
	}
	if n := e.shells.Len(); n != 0 {
		t.Fatalf("%d foreground shells left", n)
	}
}

// TestBashExitCode is behaviour check 61.
func TestBashExitCode(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		cmd, output, text string
		code              int
	}{
		{cmd: "echo boom; exit 7", code: 7, output: "boom", text: "command exited with code 7\noutput:\nboom"},
		{cmd: "exit 3", code: 3, output: "", text: "command exited with code 3\noutput:\n(no output)"},
		{cmd: "kill -KILL $$", code: -9, output: "", text: "command exited with code -9\noutput:\n(no output)"},
	}
	for _, tt := range tests {
		_, err := e.call(t.Context(), t, "bash", e.tc("s"), map[string]any{"cmd": tt.cmd})
		want := &bub.Error{Kind: bub.KindTool, Message: "Tool 'bash' execution failed.", Details: map[string]any{
			"exit_code": tt.code, "output": tt.output, "error": tt.text,
		}}
		if err == nil || err.Kind != want.Kind || err.Message != want.Message || fmt.Sprint(err.Details) != fmt.Sprint(want.Details) {
			t.Errorf("bash %q error = %v %v, want %v", tt.cmd, err, details(err), want.Details)
		}
	}
	if n := e.shells.Len(); n != 0 {
		t.Fatalf("shell registry has %d shells after foreground runs, want 0", n)
	}
}

func details(err *bub.Error) map[string]any {
	if err == nil {
		return nil
	}
	return err.Details
}

func TestBashRejects(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		args map[string]any
		kind bub.Kind
	}{
		{name: "zero timeout", args: map[string]any{"cmd": "true", "timeout_seconds": 0}, kind: bub.KindInvalidInput},
		{name: "missing cwd", args: map[string]any{"cmd": "true", "cwd": "no/such/dir"}, kind: bub.KindTool},
		{name: "missing cmd", args: map[string]any{}, kind: bub.KindInvalidInput},
	}
	for _, tt := range tests {
		if _, err := e.call(t.Context(), t, "bash", e.tc("s"), tt.args); err == nil || err.Kind != tt.kind {
			t.Errorf("%s: error = %v, want kind %s", tt.name, err, tt.kind)
		}
	}
	if _, err := e.call(t.Context(), t, "bash", nil, map[string]any{"cmd": "true"}); err == nil || err.Kind != bub.KindInvalidInput {
		t.Errorf("bash without context = %v", err)
	}
}

func TestBashTimeoutTerminatesProcessGroup(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.ws, "pid")
	got := e.run(t, "bash", e.tc("s"), map[string]any{
		"cmd":             "sleep 30 & echo $! > " + pidFile + "; wait",
		"timeout_seconds": 1,
	})
	if want := "command timed out after 1 seconds and was terminated"; got != want {
		t.Fatalf("bash = %q, want %q", got, want)
	}
	assertKilled(t, pidFile)
	if n := e.shells.Len(); n != 0 {
		t.Fatalf("%d shells left after a timeout", n)
	}
}

func TestBashCancellationTerminates(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.ws, "pid")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan *bub.Error)
	go func() {
		_, err := e.call(ctx, t, "bash", e.tc("s"), map[string]any{"cmd": "sleep 30 & echo $! > " + pidFile + "; wait"})
		done <- err
	}()
	waitFor(t, "the command to start", func() bool { return readPid(pidFile) > 0 })
	cancel()
	select {
	case err := <-done:
		if err == nil || err.Details["error"] != context.Canceled.Error() {
			t.Fatalf("cancelled bash error = %v %v", err, details(err))
		}
	case <-time.After(waitLimit):
		t.Fatal("bash did not return after cancellation")
	}
	assertKilled(t, pidFile)
	if n := e.shells.Len(); n != 0 {
		t.Fatalf("%d shells left after cancellation", n)
	}
}

// assertKilled waits until the process whose pid is in pidFile is gone.
func assertKilled(t *testing.T, pidFile string) {
	t.Helper()
	var pid int
	waitFor(t, "the pid file", func() bool { pid = readPid(pidFile); return pid > 0 })
	waitFor(t, fmt.Sprintf("process %d to die", pid), func() bool { return !alive(pid) })
}

// readPid returns the pid written to pidFile, or 0 while there is none.
func readPid(pidFile string) int {
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// TestBashBackground is behaviour check 62.
func TestBashBackground(t *testing.T) {
	e := newEnv(t)

	finished := e.background(t, "s", "echo one; echo two >&2")
	waitExited(t, finished)
	got := e.run(t, "bash.output", nil, map[string]any{"shell_id": finished.id})
	if want := fmt.Sprintf("id: %s\nstatus: exited\nexit_code: 0\nnext_offset: 8\noutput:\none\ntwo", finished.id); got != want {
		t.Fatalf("bash.output =\n%s\nwant\n%s", got, want)
	}
	_, err := e.call(t.Context(), t, "bash.output", nil, map[string]any{"shell_id": finished.id})
	if err == nil || err.Details["error"] != "unknown shell id: "+finished.id {
		t.Fatalf("bash.output after exit = %v %v", err, details(err))
	}

	killedLater := e.background(t, "s", "true")
	waitExited(t, killedLater)
	if got, want := e.run(t, "bash.kill", nil, map[string]any{"shell_id": killedLater.id}), fmt.Sprintf("id: %s\nstatus: exited\nexit_code: 0", killedLater.id); got != want {
		t.Fatalf("bash.kill of a finished shell = %q, want %q", got, want)
	}

	running := e.background(t, "s", "echo started; exec sleep 30")
	var out string
	waitFor(t, "output of the running shell", func() bool {
		out = e.run(t, "bash.output", nil, map[string]any{"shell_id": running.id})
		return strings.HasSuffix(out, "started")
	})
	if want := fmt.Sprintf("id: %s\nstatus: running\nexit_code: null\nnext_offset: 8\noutput:\nstarted", running.id); out != want {
		t.Fatalf("bash.output of a running shell =\n%s\nwant\n%s", out, want)
	}
	if got, want := e.run(t, "bash.kill", nil, map[string]any{"shell_id": running.id}), fmt.Sprintf("id: %s\nstatus: exited\nexit_code: -15", running.id); got != want {
		t.Fatalf("bash.kill = %q, want %q", got, want)
	}
	if alive(running.pid) {
		t.Fatal("killed shell is alive")
	}
	for _, name := range []string{"bash.output", "bash.kill"} {
		_, err := e.call(t.Context(), t, name, nil, map[string]any{"shell_id": running.id})
		if err == nil || err.Details["error"] != "unknown shell id: "+running.id {
			t.Fatalf("%s after kill = %v %v", name, err, details(err))
		}
	}
}

func TestBashOutputWindow(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		args map[string]any
		next int
		body string
	}{
		{name: "offset and limit", args: map[string]any{"offset": 2, "limit": 3}, next: 5, body: "cdé"},
		{name: "offset only", args: map[string]any{"offset": 4}, next: 9, body: "éf  \n"},
		{name: "offset past the end", args: map[string]any{"offset": 99}, next: 9, body: ""},
		{name: "negative offset and limit", args: map[string]any{"offset": -3, "limit": -1}, next: 0, body: ""},
	}
	for _, tt := range tests {
		sh := e.background(t, "s", "printf 'abcdéf  \\n'")
		waitExited(t, sh)
		tt.args["shell_id"] = sh.id
		body := strings.TrimRight(tt.body, " \n")
		if body == "" {
			body = "(no output)"
		}
		want := fmt.Sprintf("id: %s\nstatus: exited\nexit_code: 0\nnext_offset: %d\noutput:\n%s", sh.id, tt.next, body)
		if got := e.run(t, "bash.output", nil, tt.args); got != want {
			t.Errorf("%s: bash.output =\n%s\nwant\n%s", tt.name, got, want)
		}
	}
}

func TestKillEscalatesToSIGKILL(t *testing.T) {
	e := newEnv(t)
	e.shells.termGrace = 50 * time.Millisecond
	sh := e.background(t, "s", "trap '' TERM; echo ready; while :; do sleep 1; done")
	waitFor(t, "the TERM trap", func() bool { return strings.Contains(sh.out.String(), "ready") })
	if got, want := e.run(t, "bash.kill", nil, map[string]any{"shell_id": sh.id}), fmt.Sprintf("id: %s\nstatus: exited\nexit_code: -9", sh.id); got != want {
		t.Fatalf("bash.kill = %q, want %q", got, want)
	}
}

func TestForegroundDoesNotWaitForLeftoverChildren(t *testing.T) {
	e := newEnv(t)
	e.shells.drainGrace = 50 * time.Millisecond
	pidFile := filepath.Join(e.ws, "pid")
	t.Cleanup(func() {
		if pid := readPid(pidFile); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// The sleep keeps the output pipe open after the shell exits.
	got := e.run(t, "bash", e.tc("s"), map[string]any{"cmd": "sleep 30 & echo $! > " + pidFile + "; echo done", "timeout_seconds": 20})
	if got != "done" {
		t.Fatalf("bash = %q, want done", got)
	}
}

// TestQuit is behaviour check 63.
func TestQuit(t *testing.T) {
	e := newEnv(t)
	a1 := e.background(t, "A", "exec sleep 30")
	a2 := e.background(t, "A", "exec sleep 30")
	b := e.background(t, "B", "exec sleep 30")

	if got := e.run(t, "quit", e.tc("A"), nil); got != "Session tasks stopped." {
		t.Fatalf("quit = %q", got)
	}
	e.mu.Lock()
	quits := append([]string(nil), e.quits...)
	e.mu.Unlock()
	if fmt.Sprint(quits) != "[A]" {
		t.Fatalf("router quit called for %v, want [A]", quits)
	}
	for _, sh := range []*shell{a1, a2} {
		if _, err := e.shells.get(sh.id); err == nil || alive(sh.pid) {
			t.Fatalf("shell %s of session A survived quit", sh.id)
		}
	}
	if out := e.run(t, "bash.output", nil, map[string]any{"shell_id": b.id}); !strings.Contains(out, "status: running") {
		t.Fatalf("session B's shell after A quit:\n%s", out)
	}
	if n := e.shells.TerminateSession("B"); n != 1 || alive(b.pid) {
		t.Fatalf("TerminateSession(B) = %d, alive %v", n, alive(b.pid))
	}
}

func TestQuitError(t *testing.T) {
	shells, err := NewShells()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shells.Close() })
	var reg tools.Registry
	boom := errors.New("router down")
	if err := Register(&reg, Options{Shells: shells, Quit: func(context.Context, string) error { return boom }}); err != nil {
		t.Fatal(err)
	}
	quit, _ := reg.Get("quit")
	if _, err := tools.Invoke(t.Context(), quit, &tools.Context{}, nil); err == nil || err.Details["error"] != "router down" {
		t.Fatalf("quit = %v", err)
	}
}

func TestShellsClose(t *testing.T) {
	e := newEnv(t)
	sh := e.background(t, "s", "exec sleep 30")
	if err := e.shells.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(sh.pid) || e.shells.Len() != 0 {
		t.Fatal("Close left a shell running")
	}
	_, err := e.call(t.Context(), t, "bash", e.tc("s"), map[string]any{"cmd": "true"})
	if err == nil || err.Details["error"] != ErrShellsClosed.Error() {
		t.Fatalf("bash after Close = %v %v", err, details(err))
	}
	if err := e.shells.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestShellsOptions(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		e := newEnv(t, WithEnv([]string{"FOO=bar"}))
		if got := e.run(t, "bash", e.tc("s"), map[string]any{"cmd": "echo $FOO:$HOME"}); got != "bar:" {
			t.Fatalf("bash = %q", got)
		}
	})
	t.Run("shell", func(t *testing.T) {
		e := newEnv(t, WithShell("sh"))
		if !strings.HasSuffix(e.shells.shell, "/sh") {
			t.Fatalf("shell = %q", e.shells.shell)
		}
		if got := e.run(t, "bash", e.tc("s"), map[string]any{"cmd": "echo ok"}); got != "ok" {
			t.Fatalf("bash = %q", got)
		}
	})
	t.Run("max output", func(t *testing.T) {
		e := newEnv(t, WithMaxOutput(10))
		got := e.run(t, "bash", e.tc("s"), map[string]any{"cmd": "printf 0123456789abcdef"})
		if want := "0123456789\n[output truncated: 6 bytes dropped]"; got != want {
			t.Fatalf("bash = %q, want %q", got, want)
		}
	})
	for name, opt := range map[string]ShellsOption{"missing shell": WithShell("no-such-shell-xyz"), "zero max output": WithMaxOutput(0)} {
		if _, err := NewShells(opt); err == nil {
			t.Errorf("NewShells(%s) succeeded", name)
		}
	}
}
