package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// resumeWait bounds every wait of the resume tests.
const resumeWait = 30 * time.Second

// crashAfterTool is a plugin whose after_tool_call blocks the first
// worker's run once its tool ran and tool_call.started was published,
// before tool_call.finished is: the point where the test "kills" that
// worker (closes its connection and cancels its turn). It counts the
// after_tool_call calls of a run it does not block.
type crashAfterTool struct {
	block   bool
	reached chan struct{}
	mu      sync.Mutex
	after   int
}

func (*crashAfterTool) Name() string { return "crash-after-tool" }

func (c *crashAfterTool) AfterToolCall(ctx context.Context, _ hooks.AfterToolCallInput) error {
	if c.block {
		close(c.reached)
		<-ctx.Done()
		return ctx.Err()
	}
	c.mu.Lock()
	c.after++
	c.mu.Unlock()
	return nil
}

// resumeRig is one NATS server with the topology, a fake model and a
// workspace, on which a turn runs on a first runtime that dies mid-tool
// and is redelivered to a second.
type resumeRig struct {
	srv       *natstest.Server
	fake      *fakellm.Server
	base      string
	workspace string
	names     subjects.Names
}

func newResumeRig(t *testing.T, steps ...fakellm.Step) *resumeRig {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	names := subjects.Default()
	if _, err := natsx.Apply(t.Context(), js, names, natsx.Topology{MemoryStorage: true}, natsx.Provision, nil); err != nil {
		t.Fatal(err)
	}
	fake, base := fakellm.Start(t, fakellm.Script{Steps: steps})
	return &resumeRig{srv: srv, fake: fake, base: base, workspace: t.TempDir(), names: names}
}

// runtime starts a turn runtime on its own connection with plugin.
func (r *resumeRig) runtime(t *testing.T, plugin hooks.Plugin) (*Runtime, *nats.Conn) {
	t.Helper()
	nc, js := r.srv.JetStream(t)
	state, err := js.KeyValue(t.Context(), r.names.StateBucket())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := NewRuntime(t.Context(), RuntimeOptions{
		NC: nc, JS: js, Names: r.names, Source: events.Source("worker", "t"), State: state,
		TapeStore: func(ctx context.Context) (tape.Store, error) { return tape.NewJetStreamStore(ctx, js, r.names) },
		Models:    llm.Config{Model: "openai:fake", APIBase: r.base, APIKey: "x"},
		Workspace: r.workspace,
		Plugins:   []hooks.Plugin{plugin},
		// No recorder runs here: a redelivered turn whose first run
		// finished would wait the whole bound for its commit.
		ReadYourWrites: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt, nc
}

// crashThenResume runs env on a first runtime until its tool ran, kills
// it there, and runs the redelivery on a second runtime. It returns the
// second runtime's plugin and the replies it published.
func (r *resumeRig) crashThenResume(t *testing.T, env *envelope.Envelope, between func()) *crashAfterTool {
	t.Helper()
	_, js := r.srv.JetStream(t)
	seq := r.publishInbound(t, env)
	first := &crashAfterTool{block: true, reached: make(chan struct{})}
	rtA, ncA := r.runtime(t, first)
	ctxA, crash := context.WithCancel(t.Context())
	doneA := make(chan error, 1)
	go func() { doneA <- rtA.Process(ctxA, Inbound{Envelope: env, Delivery: 1, StreamSeq: seq}) }()
	select {
	case <-first.reached:
	case <-time.After(resumeWait):
		t.Fatal("the first worker never ran the tool")
	}
	natstest.Eventually(t, resumeWait, func() (bool, string) {
		st, err := js.Stream(t.Context(), r.names.EventsStream())
		if err != nil {
			return false, err.Error()
		}
		_, err = st.GetLastMsgForSubject(t.Context(), r.names.Event(env.SessionID, events.SubjectName(events.TypeToolCallStarted)))
		return err == nil, "tool_call.started not stored yet"
	})
	ncA.Close() // the worker dies: nothing it does from here on reaches NATS
	crash()
	<-doneA
	if between != nil {
		between()
	}
	second := &crashAfterTool{}
	rtB, _ := r.runtime(t, second)
	if err := rtB.Process(t.Context(), Inbound{Envelope: env, Delivery: 2, StreamSeq: seq}); err != nil {
		t.Fatalf("the redelivered turn: %v", err)
	}
	return second
}

// publishInbound stores env in the inbound stream, as ingress does, and
// returns its stream sequence.
func (r *resumeRig) publishInbound(t *testing.T, env *envelope.Envelope) uint64 {
	t.Helper()
	_, js := r.srv.JetStream(t)
	return storeInbound(t, js, r.names, env)
}

// storeInbound stores env in the inbound stream through js, as ingress
// does, and returns its stream sequence.
func storeInbound(t *testing.T, js jetstream.JetStream, names subjects.Names, env *envelope.Envelope) uint64 {
	t.Helper()
	ev, err := events.New(events.TypeEnvelopeInbound, events.Attrs{ID: env.ID, Source: "/bub/test/t", SessionID: env.SessionID}, env)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.ToMsg(names.Inbound(env.Channel), ev)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// stored decodes into a new T the data of every message of stream on
// subject, oldest first.
func stored[T any](t *testing.T, r *resumeRig, stream, subject string) []T {
	t.Helper()
	_, js := r.srv.JetStream(t)
	st, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for next := uint64(1); ; {
		m, err := st.GetMsg(t.Context(), next, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return out
		}
		next = m.Sequence + 1
		ev, err := events.Decode(m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := events.DecodeData(ev, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
}

// replies returns the texts of the outbound envelopes of session.
func (r *resumeRig) replies(t *testing.T, session string) []string {
	t.Helper()
	var out []string
	for _, env := range stored[envelope.Envelope](t, r, r.names.OutboundStream(), r.names.OutboundAll()) {
		if env.SessionID == session {
			out = append(out, env.Content)
		}
	}
	return out
}

// runStarted returns the run.started payloads of session, oldest first.
func (r *resumeRig) runStarted(t *testing.T, session string) []events.RunStartedData {
	t.Helper()
	return stored[events.RunStartedData](t, r, r.names.EventsStream(), r.names.Event(session, events.SubjectName(events.TypeRunStarted)))
}

// lastToolResult is the tool message of the model's last request.
func lastToolResult(t *testing.T, fake *fakellm.Server) string {
	t.Helper()
	reqs := fake.Requests()
	msgs := reqs[len(reqs)-1].Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleTool {
			return msgs[i].Content.PlainText()
		}
	}
	t.Fatalf("no tool message in the last request: %+v", msgs)
	return ""
}

// toolTurn is a script whose first call asks for tool with args and whose
// second (after the tool result) answers done.
func toolTurn(tool, args string) []fakellm.Step {
	return []fakellm.Step{
		{Match: "please", ToolCalls: []fakellm.ToolCall{{Name: tool, Arguments: json.RawMessage(args)}}},
		{Match: "Continue the task", Text: "done"},
	}
}

// checkResumed checks what every interrupted tool call test shares: the
// model was called twice in all (the first call, answered before the
// crash, was not made again), the user got one reply, the second run says
// it resumes the first, and after_tool_call ran once, for the interrupted
// call only.
func checkResumed(t *testing.T, r *resumeRig, env *envelope.Envelope, second *crashAfterTool) {
	t.Helper()
	if n := len(r.fake.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2: the call answered before the crash was made again", n)
	}
	if got := r.replies(t, env.SessionID); len(got) != 1 || got[0] != "done" {
		t.Errorf("replies %q, want one %q", got, "done")
	}
	runs := r.runStarted(t, env.SessionID)
	if len(runs) != 2 || runs[1].Metadata.Resumes == "" || runs[1].Metadata.Delivery != 2 || runs[1].Metadata.EnvelopeID != env.ID {
		t.Errorf("run.started events %+v, want the first run's and its copy opening the resumed run (resumes set, delivery 2)", runs)
	}
	if second.after != 1 {
		t.Errorf("after_tool_call ran %d times on the resumed run, want 1 (the interrupted call's result)", second.after)
	}
}

func resumeEnvelope(session string) *envelope.Envelope {
	return &envelope.Envelope{ID: events.NewID(), SessionID: session, Channel: "cli", ChatID: "c", Content: "please use the tool"}
}

// A read_only tool whose result was never recorded runs again.
func TestResumeRerunsAnInterruptedReadOnlyTool(t *testing.T) {
	r := newResumeRig(t, toolTurn("fs_read", `{"path":"in.txt"}`)...)
	file := filepath.Join(r.workspace, "in.txt")
	if err := os.WriteFile(file, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := resumeEnvelope("resume:read")
	second := r.crashThenResume(t, env, func() {
		if err := os.WriteFile(file, []byte("second"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	checkResumed(t, r, env, second)
	if got := lastToolResult(t, r.fake); !strings.Contains(got, "second") {
		t.Errorf("tool result %q, want the file as the re-run read it (second)", got)
	}
}

// An idempotent tool whose result was never recorded runs again.
func TestResumeRerunsAnInterruptedIdempotentTool(t *testing.T) {
	r := newResumeRig(t, toolTurn("fs_write", `{"path":"out.txt","content":"x"}`)...)
	file := filepath.Join(r.workspace, "out.txt")
	env := resumeEnvelope("resume:write")
	second := r.crashThenResume(t, env, func() {
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	})
	checkResumed(t, r, env, second)
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("out.txt %q %v, want it written again by the re-run", b, err)
	}
	if got := lastToolResult(t, r.fake); strings.Contains(got, agent.InterruptedToolMessage) {
		t.Errorf("tool result %q: the idempotent call was not retried", got)
	}
}

// An irreversible tool whose result was never recorded does not run
// again: the model gets the interrupted error.
func TestResumeDoesNotRerunAnInterruptedIrreversibleTool(t *testing.T) {
	r := newResumeRig(t, toolTurn("fs_edit", `{"path":"e.txt","old":"a","new":"ab"}`)...)
	file := filepath.Join(r.workspace, "e.txt")
	if err := os.WriteFile(file, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := resumeEnvelope("resume:edit")
	second := r.crashThenResume(t, env, nil)
	checkResumed(t, r, env, second)
	if b, err := os.ReadFile(file); err != nil || string(b) != "ab" {
		t.Errorf("e.txt %q %v, want the one edit of the first worker (ab)", b, err)
	}
	if got := lastToolResult(t, r.fake); !strings.Contains(got, agent.InterruptedToolMessage) {
		t.Errorf("tool result %q, want %q", got, agent.InterruptedToolMessage)
	}
}

// A run that finished but whose worker died before acknowledging the turn
// is replayed from its records: no model call, the same one reply.
func TestResumeReplaysAFinishedUnacknowledgedRun(t *testing.T) {
	r := newResumeRig(t, fakellm.Step{Match: "please", Text: "done"})
	env := resumeEnvelope("resume:finished")
	seq := r.publishInbound(t, env)
	rtA, _ := r.runtime(t, &crashAfterTool{})
	if err := rtA.Process(t.Context(), Inbound{Envelope: env, Delivery: 1, StreamSeq: seq}); err != nil {
		t.Fatal(err)
	}
	rtB, _ := r.runtime(t, &crashAfterTool{})
	if err := rtB.Process(t.Context(), Inbound{Envelope: env, Delivery: 2, StreamSeq: seq}); err != nil {
		t.Fatal(err)
	}
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("%d model calls, want 1: the replay called the model", n)
	}
	if got := r.replies(t, env.SessionID); len(got) != 1 || got[0] != "done" {
		t.Errorf("replies %q, want one %q", got, "done")
	}
	if runs := r.runStarted(t, env.SessionID); len(runs) != 2 || runs[1].Metadata.Resumes == "" {
		t.Errorf("run.started events %+v, want the replay to resume the first run", runs)
	}
}
