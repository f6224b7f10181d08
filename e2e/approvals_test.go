package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// approvalStack is ingress, recorder, a worker and the example policy
// as two interceptors: gate asks about fs.write (a long timeout), quick
// asks about fs.read (apQuickTimeout, default deny).
type approvalStack struct {
	*crashStack
	requests chan events.ApprovalRequestedData
	nc       *nats.Conn
}

const apQuickTimeout = 3 * time.Second

func startApprovalStack(t *testing.T) *approvalStack {
	t.Helper()
	s := startCrashStack(t, "BUB_INTERCEPTORS=gate,quick", "BUB_INTERCEPTOR_GATE_FAILURE=closed", "BUB_INTERCEPTOR_QUICK_FAILURE=closed")
	natsEnv := []string{"BUB_NATS_URL=" + s.srv.URL}
	start(t, "policy", natsEnv, "--name", "gate", "--ask-tools", "fs.write", "--ask-timeout", "5m")
	start(t, "policy", natsEnv, "--name", "quick", "--ask-tools", "fs.read", "--ask-timeout", apQuickTimeout.String(), "--ask-default", "deny")
	nc := s.srv.Conn(t)
	icWaitInstances(t, nc, map[string]int{"gate": 1, "quick": 1})
	// Each turn writes or reads out.txt with its own call id; the step
	// after the tool call echoes the continuation prompt.
	call := func(match, id, tool, args string) fakellm.Step {
		return fakellm.Step{Match: match, Repeat: true, ToolCalls: []fakellm.ToolCall{{ID: id, Name: tool, Arguments: json.RawMessage(args)}}}
	}
	write := `{"path": "out.txt", "content": "written"}`
	s.fake.Enqueue(
		call("write one", "call_w1", "fs_write", write), call("write two", "call_w2", "fs_write", write),
		call("write three", "call_w3", "fs_write", write), call("please read", "call_r", "fs_read", `{"path": "out.txt"}`),
	)
	reqs := make(chan events.ApprovalRequestedData, 16)
	sub, err := nc.Subscribe(subjects.Default().EventsOfType("approval.requested"), func(m *nats.Msg) {
		ev, err := events.Decode(m.Header, m.Data)
		if err != nil {
			t.Errorf("approval.requested: %v", err)
			return
		}
		var d events.ApprovalRequestedData
		if err := events.DecodeData(ev, &d); err != nil {
			t.Errorf("approval.requested: %v", err)
			return
		}
		reqs <- d
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &approvalStack{crashStack: s, requests: reqs, nc: nc}
}

// requested waits for the next approval.requested event.
func (s *approvalStack) requested(t *testing.T) events.ApprovalRequestedData {
	t.Helper()
	select {
	case d := <-s.requests:
		return d
	case <-time.After(60 * time.Second):
		t.Fatal("no approval.requested event")
	}
	return events.ApprovalRequestedData{}
}

// answerHTTP posts an answer and returns the status and body.
func (s *approvalStack) answerHTTP(t *testing.T, id, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(s.web+"/v1/approvals/"+id, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wantReply waits for the turn's single reply.
func wantReply(t *testing.T, got <-chan reply) reply {
	t.Helper()
	select {
	case r := <-got:
		if len(r.Outbounds) != 1 || r.Error != "" {
			t.Fatalf("reply %+v", r)
		}
		return r
	case <-time.After(90 * time.Second):
		t.Fatal("no reply")
	}
	return reply{}
}

// toolResultOf is the result the model was given for call id.
func (s *approvalStack) toolResultOf(t *testing.T, id string) string {
	t.Helper()
	for _, r := range s.fake.Requests() {
		if res := icToolResult(r, id); res != "" {
			return res
		}
	}
	return ""
}

// TestApprovalPaths: a before_tool_call ask (the example policy as a
// remote interceptor) parks the call until it is approved over HTTP,
// denied over NATS, times out, or is approved with `bub approve` while
// no worker runs (the worker that parked it was killed; the next one
// completes the turn). The worker runs one turn at a time
// (BUB_WORKER_CONCURRENCY=1): a parked turn holds no slot, so another
// session's turn runs while it waits. Each request, answer and timeout is an event and
// a tape entry; a second answer is refused.
func TestApprovalPaths(t *testing.T) {
	s := startApprovalStack(t)
	// One turn slot: a parked turn gives it back, so other turns still run.
	wA := s.worker(t, "wA", "BUB_WORKER_CONCURRENCY=1")

	t.Run("approve over HTTP", func(t *testing.T) {
		got := s.asyncPost(t, "ap:approve", "please write one file")
		d := s.requested(t)
		if d.Tool != "fs_write" || d.Default != "deny" || d.Reason != "Tool 'fs_write' needs your approval." || d.TimeoutMS != 300000 {
			t.Fatalf("approval.requested %+v", d)
		}
		if status, r := post(t, s.web, map[string]any{"content": "hello while parked", "session_id": "ap:other"}, "60s"); status != 200 || len(r.Outbounds) != 1 {
			t.Fatalf("a turn beside the parked one (concurrency 1): %d %+v", status, r)
		}
		if status, body := s.answerHTTP(t, d.ID, `{"decision": "perhaps"}`); status != 400 || !strings.Contains(body, "invalid_answer") {
			t.Fatalf("bad answer: %d %s", status, body)
		}
		if status, body := s.answerHTTP(t, strings.Repeat("0", 32), `{"decision": "approve"}`); status != 404 {
			t.Fatalf("unknown approval: %d %s", status, body)
		}
		if status, body := s.answerHTTP(t, d.ID, `{"decision": "approve", "reason": "fine"}`); status != 200 || !strings.Contains(body, `"status":"approved"`) {
			t.Fatalf("answer: %d %s", status, body)
		}
		wantReply(t, got)
		if res := s.toolResultOf(t, "call_w1"); !strings.HasPrefix(res, "wrote: ") {
			t.Errorf("tool result after approval: %q", res)
		}
		if status, body := s.answerHTTP(t, d.ID, `{"decision": "deny"}`); status != 409 || !strings.Contains(body, "already approved by http") {
			t.Errorf("second answer: %d %s", status, body)
		}
		s.wantTape(t, "ap:approve", "approval.requested", "approval.answered")
	})

	t.Run("deny over NATS", func(t *testing.T) {
		got := s.asyncPost(t, "ap:deny", "please write two files")
		d := s.requested(t)
		bad, err := s.nc.Request(subjects.Default().ApprovalAnswer(), []byte(`{"decision": "deny"}`), 10*time.Second)
		if err != nil || !strings.Contains(string(bad.Data), "id is required") {
			t.Fatalf("bad NATS answer: %v %s", err, bad.Data)
		}
		m, err := s.nc.Request(subjects.Default().ApprovalAnswer(), []byte(`{"id": "`+d.ID+`", "decision": "deny", "reason": "not today"}`), 10*time.Second)
		if err != nil || !strings.Contains(string(m.Data), `"status":"denied"`) {
			t.Fatalf("NATS answer: %v %s", err, m.Data)
		}
		wantReply(t, got)
		if res := s.toolResultOf(t, "call_w2"); !strings.Contains(res, "Tool 'fs_write' call denied by nats: not today.") {
			t.Errorf("tool result after the denial: %q", res)
		}
		s.wantTape(t, "ap:deny", "approval.requested", "approval.answered")
	})

	t.Run("timeout applies the default", func(t *testing.T) {
		began := time.Now()
		got := s.asyncPost(t, "ap:timeout", "please read the file")
		d := s.requested(t)
		wantReply(t, got)
		if waited := time.Since(began); waited < apQuickTimeout {
			t.Errorf("the turn ended after %v, before the %v deadline", waited, apQuickTimeout)
		}
		if res := s.toolResultOf(t, "call_r"); !strings.Contains(res, "not approved before its deadline; denied by default") {
			t.Errorf("tool result after the timeout: %q", res)
		}
		if status, body := s.answerHTTP(t, d.ID, `{"decision": "approve"}`); status != 409 || !strings.Contains(body, "timed out") {
			t.Errorf("answer after the timeout: %d %s", status, body)
		}
		s.wantTape(t, "ap:timeout", "approval.requested", "approval.timed_out")
	})

	t.Run("bub chat answers inline", func(t *testing.T) {
		cmd, stdin, stdout := startChat(t, nil, "--nats", s.srv.URL, "--session", "ap:chat")
		var got strings.Builder
		// readUntil reads until the output holds want n times.
		readUntil := func(want string, n int) {
			t.Helper()
			buf := make([]byte, 512)
			for strings.Count(got.String(), want) < n {
				n, err := stdout.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					t.Fatalf("bub chat output lacks %q: %v\n%s", want, err, got.String())
				}
			}
		}
		if _, err := io.WriteString(stdin, "please write one more file\n"); err != nil {
			t.Fatal(err)
		}
		readUntil("answer y to approve, n [reason] to deny: ", 1)
		d := s.requested(t)
		if !strings.Contains(got.String(), "[approval "+d.ID+"] Tool 'fs_write' needs your approval.") {
			t.Errorf("bub chat shows the approval as:\n%s", got.String())
		}
		if _, err := io.WriteString(stdin, "y\n"); err != nil {
			t.Fatal(err)
		}
		readUntil("approval "+d.ID+": approved", 1)
		readUntil("bub> ", 2) // the turn's reply, then the next prompt
		if _, err := io.WriteString(stdin, ",quit\n"); err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(stdout)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("bub chat: %v\n%s", err, got.String())
		}
		s.wantTape(t, "ap:chat", "approval.requested", "approval.answered")
	})

	t.Run("worker killed while waiting", func(t *testing.T) {
		got := s.asyncPost(t, "ap:kill", "please write three files")
		d := s.requested(t)
		wA.kill()
		out := run(t, "bub", nil, "approve", "--nats", s.srv.URL, d.ID)
		if !strings.Contains(out, "approved") {
			t.Fatalf("bub approve: %s", out)
		}
		s.worker(t, "wB") // the redelivered turn finds the answer
		wantReply(t, got)
		if n := s.repliesTo(t, d.EnvelopeID); n != 1 {
			t.Errorf("%d replies, want 1", n)
		}
		if res := s.toolResultOf(t, "call_w3"); !strings.HasPrefix(res, "wrote: ") {
			t.Errorf("tool result after the approval: %q", res)
		}
		cmd := exec.Command(binary(t, "bub"), "deny", "--nats", s.srv.URL, "--reason", "too late", d.ID)
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "already approved by cli") {
			t.Errorf("second answer with bub deny: %v %s", err, out)
		}
		s.wantTape(t, "ap:kill", "approval.requested", "approval.answered")
	})
}

// wantTape waits until session's tape holds an event entry of each name.
func (s *approvalStack) wantTape(t *testing.T, session string, names ...string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		entries := s.tapeEntries(t, session)
		for _, n := range names {
			if countEntries(entries, eventNamed(n)) == 0 {
				return false, "the tape has no " + n + " entry"
			}
		}
		return true, ""
	})
}

// startChat starts `bub chat` with args (and --log-level warn) on pipes;
// a watchdog kills it after 90s, and the test's end does.
func startChat(t *testing.T, env []string, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(binary(t, "bub"), append(append([]string{"chat"}, args...), "--log-level", "warn")...)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() })
	t.Cleanup(func() { watchdog.Stop(); _ = cmd.Process.Kill() })
	return cmd, stdin, stdout
}
