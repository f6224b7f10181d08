package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binary returns the path of a built binary of this repository (a name
// under cmd/ or examples/interceptors/).
func binary(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("BUB_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("BUB_BIN_DIR has no %s: %v (run make build)", name, err)
		}
		return p
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "bub-e2e-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+"/", "../cmd/...", "../examples/...")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, name)
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a running binary; its output is kept and logged when the test
// fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a binary with env added to the environment; it is killed when
// the test ends.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t, name), args...)
	cmd.Env = append(append(os.Environ(), "BUB_LOG_LEVEL=debug"), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- output of %s %s:\n%s", name, strings.Join(args, " "), out.String())
		}
	})
	return p
}

// kill stops the process group with SIGKILL and waits for it.
func (p *proc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to d for a clean exit.
func (p *proc) stop(t *testing.T, d time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited with %v", p.name, p.err)
		}
	case <-time.After(d):
		t.Errorf("%s did not stop within %v", p.name, d)
		p.kill()
	}
}

// run runs a binary to completion and returns its stdout.
func run(t *testing.T, name string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// waitHTTP waits until GET url answers 200.
func waitHTTP(t *testing.T, url string, within time.Duration) {
	t.Helper()
	eventually(t, within, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, url + " answered " + resp.Status
	})
}

// reply is the body of POST /v1/messages.
type reply struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Pending   bool   `json:"pending"`
	Outbounds []struct {
		ID        string `json:"id"`
		Content   string `json:"content"`
		Kind      string `json:"kind"`
		InReplyTo string `json:"in_reply_to"`
	} `json:"outbounds"`
	Error string `json:"error"`
}

// post sends one message and decodes the reply.
func post(t *testing.T, base string, body any, wait string) (int, reply) {
	t.Helper()
	b, _ := json.Marshal(body)
	url := base + "/v1/messages"
	if wait != "" {
		url += "?wait=" + wait
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("reply %d is not JSON: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, r
}

// eventually is natstest.Eventually.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	natstest.Eventually(t, within, cond)
}
