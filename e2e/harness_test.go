package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
)

// binary returns the path of a built binary of this repository (a name
// under cmd/ or examples/interceptors/).
func binary(t *testing.T, name string) string {
	t.Helper()
	return proctest.Binary(t, name)
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	return proctest.FreeAddr(t)
}

// proc is a running binary (proctest.Proc) with test-failing helpers.
type proc struct {
	*proctest.Proc
}

// start runs a binary with debug logs and env added to the environment; it
// is killed when the test ends and its output logged if the test failed.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return &proc{proctest.Start(t, binary(t, name), append([]string{"BUB_LOG_LEVEL=debug"}, env...), args...)}
}

// kill stops the process group with SIGKILL and waits for it.
func (p *proc) kill() { p.Kill() }

// stop sends SIGTERM and fails the test unless the process exits cleanly
// within d.
func (p *proc) stop(t *testing.T, d time.Duration) {
	t.Helper()
	if err := p.Stop(d); err != nil {
		t.Error(err)
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
	status, r, err := postCtx(context.Background(), base, body, wait)
	if err != nil {
		t.Fatal(err)
	}
	return status, r
}

// postAsync posts content to session with ?wait=60s in the background;
// the reply arrives on the channel.
func postAsync(t *testing.T, base, session, content string) <-chan reply {
	done := make(chan reply, 1)
	go func() {
		_, r := post(t, base, map[string]any{"content": content, "session_id": session}, "60s")
		done <- r
	}()
	return done
}

// postCtx sends one message within ctx and decodes the reply.
func postCtx(ctx context.Context, base string, body any, wait string) (int, reply, error) {
	b, _ := json.Marshal(body)
	url := base + "/v1/messages"
	if wait != "" {
		url += "?wait=" + wait
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, reply{}, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, reply{}, fmt.Errorf("POST %s: reading the reply: %w", url, err)
	}
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		return resp.StatusCode, reply{}, fmt.Errorf("reply %d is not JSON: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, r, nil
}

// eventually is natstest.Eventually.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	natstest.Eventually(t, within, cond)
}
