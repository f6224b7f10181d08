package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// crashStack is ingress + recorder on one NATS server with a short ack
// wait; workers are started by each test.
type crashStack struct {
	srv  *natstest.Server
	fake *fakellm.Server
	env  []string
	web  string
	js   jetstream.JetStream
}

func startCrashStack(t *testing.T, extra ...string) *crashStack {
	t.Helper()
	srv := natstest.Start(t)
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Match: "slow", Text: "slow done.", Delay: fakellm.Duration(slowDelay)},
	}})
	env := append([]string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x",
		"BUB_ACK_WAIT=2s", "BUB_TURN_TTL=2s"}, extra...)
	httpAddr := freeAddr(t)
	start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)
	start(t, "recorder", env)
	_, js := srv.JetStream(t)
	return &crashStack{srv: srv, fake: fake, env: env, web: web, js: js}
}

func (s *crashStack) worker(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	return start(t, "worker", append(append(s.env, "BUB_INSTANCE="+name), extra...), "--workspace", t.TempDir())
}

// asyncPost posts with ?wait in the background.
func (s *crashStack) asyncPost(t *testing.T, session, content string) <-chan reply {
	return postAsync(t, s.web, session, content)
}

// repliesTo counts the outbound envelopes in the stream answering id.
func (s *crashStack) repliesTo(t *testing.T, id string) int {
	t.Helper()
	names := subjects.Default()
	st, err := s.js.Stream(context.Background(), names.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for next := uint64(1); ; {
		raw, err := st.GetMsg(context.Background(), next, jetstream.WithGetMsgSubject(names.OutboundAll()))
		if err != nil {
			return n
		}
		next = raw.Sequence + 1
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		var env envelope.Envelope
		if events.DecodeData(ev, &env) == nil && env.InReplyTo == id {
			n++
		}
	}
}

// tapeEntries returns the session's tape as `bub tape show --json` prints it.
func (s *crashStack) tapeEntries(t *testing.T, session string) []map[string]any {
	t.Helper()
	out := run(t, "bub", nil, "tape", "show", "--json", "--nats", s.srv.URL, session)
	var entries []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e map[string]any
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("tape show --json: %v\n%s", err, out)
		}
		entries = append(entries, e)
	}
	return entries
}

func countEntries(entries []map[string]any, match func(map[string]any) bool) int {
	n := 0
	for _, e := range entries {
		if match(e) {
			n++
		}
	}
	return n
}

func eventNamed(name string) func(map[string]any) bool {
	return func(e map[string]any) bool {
		p, _ := e["payload"].(map[string]any)
		return e["kind"] == "event" && p["name"] == name
	}
}

func userMessage(text string) func(map[string]any) bool {
	return func(e map[string]any) bool {
		p, _ := e["payload"].(map[string]any)
		c, _ := p["content"].(string)
		return e["kind"] == "message" && p["role"] == "user" && strings.Contains(c, text)
	}
}

// TestWorkerKilledMidTurnResumesTheRun kills (SIGKILL) the worker while
// its model call streams; after the ack wait the inbound message goes to
// another worker, which resumes the run (docs/durable.md): only the call
// in flight is made again, the sender gets exactly one reply, and the tape
// holds the turn as one run — no interrupted run.
func TestWorkerKilledMidTurnResumesTheRun(t *testing.T) {
	s := startCrashStack(t)
	wA := s.worker(t, "wA")
	got := s.asyncPost(t, "crash:kill", "slow question")
	eventually(t, 30*time.Second, func() (bool, string) {
		return len(s.fake.Requests()) == 1, "the turn has not reached the model"
	})
	start := time.Now()
	wA.kill()
	s.worker(t, "wB")
	r := <-got
	if len(r.Outbounds) != 1 {
		t.Fatalf("reply after the crash: %+v", r)
	}
	t.Logf("reply %v after the kill", time.Since(start).Round(time.Millisecond))
	s.checkOneRun(t, "crash:kill", "slow question", r.ID)
	if n := s.fakeAsked("slow question"); n != 2 {
		t.Fatalf("model asked %d times, want 2 (the call in flight at the kill, made again)", n)
	}
}

// TestWorkerKilledDuringAToolCallResumesAfterIt kills the worker while
// the bash tool the model asked for runs. The next worker resumes the
// run: the model call that asked for the tool is answered from its record
// (the provider is not called again), bash — irreversible — is not run
// again and the model is told so, and the sender gets one reply from a
// run recorded once.
func TestWorkerKilledDuringAToolCallResumesAfterIt(t *testing.T) {
	s := startCrashStack(t)
	s.fake.Enqueue(
		fakellm.Step{Match: "sleepy", ToolCalls: []fakellm.ToolCall{{Name: "bash", Arguments: json.RawMessage(`{"cmd":"sleep 60"}`)}}},
		fakellm.Step{Match: "Continue the task", Text: "after the tool."},
	)
	wA := s.worker(t, "wA")
	got := s.asyncPost(t, "crash:tool", "sleepy question")
	names := subjects.Default()
	eventually(t, 30*time.Second, func() (bool, string) {
		st, err := s.js.Stream(context.Background(), names.EventsStream())
		if err != nil {
			return false, err.Error()
		}
		_, err = st.GetLastMsgForSubject(context.Background(), names.Event("crash:tool", events.SubjectName(events.TypeToolCallStarted)))
		return err == nil, "bash has not started"
	})
	wA.kill()
	s.worker(t, "wB")
	r := <-got
	if len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, "after the tool.") {
		t.Fatalf("reply after the crash: %+v", r)
	}
	if n := len(s.fake.Requests()); n != 2 {
		t.Fatalf("model asked %d times, want 2: the call answered before the kill was made again", n)
	}
	last := s.fake.Requests()[1]
	if tool := last.Messages[len(last.Messages)-2]; tool.Role != "tool" || !strings.Contains(tool.Content.PlainText(), "not retried") {
		t.Fatalf("the model was sent %+v for the interrupted bash, want the not-retried error", tool)
	}
	s.checkOneRun(t, "crash:tool", "sleepy question", r.ID)
}

// checkOneRun waits until the session's tape holds its turn as one
// finished run and checks that nothing was recorded twice: one user
// message, no interrupted run, one reply in the outbound stream.
func (s *crashStack) checkOneRun(t *testing.T, session, question, replyID string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		e := s.tapeEntries(t, session)
		return countEntries(e, eventNamed("loop.finish")) == 1, fmt.Sprintf("the run is not on the tape: %v", e)
	})
	entries := s.tapeEntries(t, session)
	if n := countEntries(entries, userMessage(question)); n != 1 {
		t.Fatalf("the turn is %d times on the tape, want once:\n%v", n, entries)
	}
	if n, m := countEntries(entries, eventNamed("run.interrupted")), countEntries(entries, eventNamed("loop.start")); n != 0 || m != 1 {
		t.Fatalf("%d interrupted runs and %d runs on the tape, want one run, resumed:\n%v", n, m, entries)
	}
	if n := s.repliesTo(t, replyID); n != 1 {
		t.Fatalf("%d replies in the outbound stream, want 1", n)
	}
}

// TestSIGTERMDrainsTheRunningTurn stops a worker while its turn runs: with
// a grace period longer than the turn, the turn finishes before the worker
// exits; with a short one it is handed back and another worker answers.
// Either way the sender gets exactly one reply.
func TestSIGTERMDrainsTheRunningTurn(t *testing.T) {
	s := startCrashStack(t)
	t.Run("finishes within the grace period", func(t *testing.T) {
		s.fake.Enqueue(fakellm.Step{Match: "drain", Text: "drained.", Delay: fakellm.Duration(3 * time.Second)})
		w := s.worker(t, "wLong", "BUB_SHUTDOWN_GRACE=30s")
		got := s.asyncPost(t, "crash:drain", "drain me")
		eventually(t, 30*time.Second, func() (bool, string) {
			return len(s.fake.Requests()) == 1, "the turn has not reached the model"
		})
		w.stop(t, 30*time.Second)
		r := <-got
		if len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, "drained.") {
			t.Fatalf("reply %+v", r)
		}
		if n := s.repliesTo(t, r.ID); n != 1 {
			t.Fatalf("%d replies, want 1", n)
		}
	})
	t.Run("handed back after the grace period", func(t *testing.T) {
		s.fake.Enqueue(fakellm.Step{Match: "handback", Text: "too slow.", Delay: fakellm.Duration(20 * time.Second)})
		w := s.worker(t, "wShort", "BUB_SHUTDOWN_GRACE=1s")
		got := s.asyncPost(t, "crash:handback", "handback me")
		before := len(s.fake.Requests())
		eventually(t, 30*time.Second, func() (bool, string) {
			return s.fakeAsked("handback me") == 1, "the turn has not reached the model"
		})
		w.stop(t, 30*time.Second)
		s.worker(t, "wNext")
		r := <-got
		if len(r.Outbounds) != 1 {
			t.Fatalf("reply %+v", r)
		}
		if n := s.repliesTo(t, r.ID); n != 1 {
			t.Fatalf("%d replies, want 1", n)
		}
		if asked := len(s.fake.Requests()) - before; asked != 2 {
			t.Fatalf("model asked %d times, want 2 (cancelled, then redelivered)", asked)
		}
	})
}

func (s *crashStack) fakeAsked(text string) int {
	n := 0
	for _, r := range s.fake.Requests() {
		if strings.Contains(r.LastUserText(), text) {
			n++
		}
	}
	return n
}

// TestMaxDeliverExhaustedByACrashIsDeadLettered: with one delivery
// allowed, a worker killed mid-turn leaves the message undeliverable; the
// max-deliveries advisory makes a live worker dead-letter it, `bub dlq
// list` shows it and `bub dlq replay` runs it after all.
func TestMaxDeliverExhaustedByACrashIsDeadLettered(t *testing.T) {
	s := startCrashStack(t, "BUB_MAX_DELIVER=1")
	wA := s.worker(t, "wA")
	id := "crash-dlq-1"
	status, r := post(t, s.web, map[string]any{"id": id, "content": "slow question", "session_id": "crash:dlq"}, "")
	if status != 202 {
		t.Fatalf("POST: %d %+v", status, r)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		return len(s.fake.Requests()) == 1, "the turn has not reached the model"
	})
	s.worker(t, "wB") // receives the advisory
	wA.kill()
	var letters []map[string]any
	eventually(t, 30*time.Second, func() (bool, string) {
		out := run(t, "bub", nil, "dlq", "list", "--reason", "max_delivered", "--json", "--nats", s.srv.URL)
		letters = nil
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			if line == "" {
				continue
			}
			var l map[string]any
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("dlq list --json line %q: %v", line, err)
			}
			letters = append(letters, l)
		}
		return len(letters) == 1, "dead letters: " + out
	})
	if letters[0]["event_id"] != id || letters[0]["subject"] != subjects.Default().Inbound("http") {
		t.Fatalf("dead letter %v", letters[0])
	}
	table := run(t, "bub", nil, "dlq", "list", "--nats", s.srv.URL)
	if !strings.Contains(table, "max_delivered") || !strings.Contains(table, id) {
		t.Fatalf("dlq list:\n%s", table)
	}
	out := run(t, "bub", nil, "dlq", "replay", "--id", id, "--nats", s.srv.URL)
	if !strings.Contains(out, "1 dead letter(s) replayed") {
		t.Fatalf("dlq replay: %s", out)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		return s.repliesTo(t, id) == 1, "no reply to the replayed message"
	})
	if out := run(t, "bub", nil, "dlq", "list", "--nats", s.srv.URL); !strings.Contains(out, "no dead letters") {
		t.Fatalf("replayed letter still listed:\n%s", out)
	}
}
