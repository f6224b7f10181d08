package proctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/freeport"
)

var (
	buildMu   sync.Mutex
	buildDir  string
	buildDone = map[string]bool{}
)

// Binary returns the path of a built binary: BUB_BIN_DIR/<name> when
// BUB_BIN_DIR is set, else the binary built (once per test process) from
// ./cmd/<name> or ./examples/interceptors/<name> of this module.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if dir := os.Getenv("BUB_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	for _, pkg := range []string{"./cmd/" + name, "./examples/interceptors/" + name} {
		if _, err := os.Stat(filepath.Join(ModuleRoot(t), pkg)); err == nil {
			return Build(t, pkg)
		}
	}
	t.Fatalf("proctest: no binary %q in BUB_BIN_DIR, cmd/ or examples/interceptors/", name)
	return ""
}

// Build compiles the main package pkg (a path relative to the module
// root, e.g. "./chaos/cmd/chaoshook") once per test process and returns
// the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "bub-proctest-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	out := filepath.Join(buildDir, filepath.Base(pkg))
	if buildDone[pkg] {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("proctest: go build %s: %v\n%s", pkg, err, b)
	}
	buildDone[pkg] = true
	return out
}

// ModuleRoot returns the directory of this module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("proctest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// FreeAddr returns a 127.0.0.1 address whose port was free a moment ago
// (see package freeport).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Proc is a running process started by [Start].
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{}
	err  error
}

// Buffer is a bytes.Buffer safe for concurrent writes and reads: the
// output of a process, or the log of services and goroutines that a test
// reads while they write.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs the binary at path (see [Binary]) with env added to the test
// process's environment. The process gets its own process group; it is
// killed when the test ends, and its output is logged if the test failed.
func Start(t testing.TB, path string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: starting %s: %v", path, err)
	}
	p := &Proc{Name: filepath.Base(path), cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- output of %s %s (tail):\n%s", p.Name, strings.Join(args, " "), tail(out.String(), 200))
		}
	})
	return p
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output returns everything the process wrote so far.
func (p *Proc) Output() string { return p.out.String() }

// Done is closed when the process exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit error, valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Kill sends SIGKILL to the process group and waits for the exit.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to d for the exit; it kills the process
// and reports an error when d passes first or the exit was not clean.
func (p *Proc) Stop(d time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s exited with %v", p.Name, p.err)
		}
		return nil
	case <-time.After(d):
		p.Kill()
		return fmt.Errorf("%s did not stop within %v", p.Name, d)
	}
}
