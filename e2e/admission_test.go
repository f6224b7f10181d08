package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// The admission tests run ingress, two worker processes (wA, wB) with a
// BUB_ADMISSION policy and the recorder against one NATS server; a first
// message keeps its session busy (a scripted slow model answer or a slow
// command) while the next ones are admitted. All coordination between the
// workers goes through NATS (turn registry KV, steering stream); each test
// logs which worker process admitted and ran which message.

// slowDelay keeps the first turn running while the next message is
// admitted on either worker.
const slowDelay = 5 * time.Second

type admissionStack struct {
	srv  *natstest.Server
	fake *fakellm.Server
	web  string
	js   jetstream.JetStream
	// channel is the channel send posts on; "" is ingress's default, http.
	channel string
}

func startAdmissionStack(t *testing.T, policy string) *admissionStack {
	t.Helper()
	srv := natstest.Start(t)
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Match: "slow", Text: "slow done.", Delay: fakellm.Duration(slowDelay)},
	}})
	env := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x", "BUB_ADMISSION=" + policy, "BUB_TURN_TTL=3s"}
	httpAddr := freeAddr(t)
	start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)
	for _, name := range []string{"wA", "wB"} {
		start(t, "worker", append(env, "BUB_INSTANCE="+name), "--workspace", t.TempDir())
	}
	start(t, "recorder", env)
	_, js := srv.JetStream(t)
	s := &admissionStack{srv: srv, fake: fake, web: web, js: js}
	s.waitWorkers(t, 2)
	return s
}

// waitWorkers waits until n workers pull from the shared consumer.
func (s *admissionStack) waitWorkers(t *testing.T, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		info, err := s.consumer(t).Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.NumWaiting >= n, fmt.Sprintf("%d workers pulling", info.NumWaiting)
	})
}

func (s *admissionStack) consumer(t *testing.T) jetstream.Consumer {
	t.Helper()
	n := subjects.Default()
	cons, err := s.js.Consumer(context.Background(), n.InboundStream(), n.WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// send posts a message without waiting and returns its envelope id.
func (s *admissionStack) send(t *testing.T, session, content string) string {
	t.Helper()
	body := map[string]any{"content": content, "session_id": session}
	if s.channel != "" {
		body["channel"] = s.channel
	}
	status, r := post(t, s.web, body, "")
	if status != 202 {
		t.Fatalf("POST %q: %d %+v", content, status, r)
	}
	return r.ID
}

// running waits until the session has n running turns in the registry.
func (s *admissionStack) running(t *testing.T, session string, n int) {
	t.Helper()
	names := subjects.Default()
	kv, err := s.js.KeyValue(context.Background(), names.TurnsBucket())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		keys, err := kv.ListKeysFiltered(context.Background(), names.TurnRunKeys(session))
		if err != nil {
			return false, err.Error()
		}
		got := 0
		for range keys.Keys() {
			got++
		}
		return got == n, fmt.Sprintf("%d running turns of %s, want %d", got, session, n)
	})
}

// outbound is one reply in the outbound stream.
type outbound struct {
	seq uint64
	env envelope.Envelope
}

// replies waits until every id in ids has its reply in BUB_OUTBOUND and
// returns the replies in stream order.
func (s *admissionStack) replies(t *testing.T, session string, ids ...string) []outbound {
	t.Helper()
	names := subjects.Default()
	var out []outbound
	eventually(t, 60*time.Second, func() (bool, string) {
		out = nil
		st, err := s.js.Stream(context.Background(), names.OutboundStream())
		if err != nil {
			return false, err.Error()
		}
		for next := uint64(1); ; {
			raw, err := st.GetMsg(context.Background(), next, jetstream.WithGetMsgSubject(names.OutboundAll()))
			if err != nil {
				break
			}
			next = raw.Sequence + 1
			ev, err := events.Decode(raw.Header, raw.Data)
			if err != nil {
				t.Fatalf("outbound %d: %v", raw.Sequence, err)
			}
			var env envelope.Envelope
			if err := events.DecodeData(ev, &env); err != nil {
				t.Fatal(err)
			}
			if env.SessionID == session {
				out = append(out, outbound{seq: raw.Sequence, env: env})
			}
		}
		var missing []string
		for _, id := range ids {
			if !slices.ContainsFunc(out, func(o outbound) bool { return o.env.InReplyTo == id }) {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no reply yet to %v (have %d)", missing, len(out))
	})
	return out
}

// workerOf returns the worker instance that published the events of the
// turn answering envelope id (from the CloudEvent source of run.started).
func (s *admissionStack) workerOf(t *testing.T, session, id string) string {
	t.Helper()
	names := subjects.Default()
	st, err := s.js.Stream(context.Background(), names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	for next := uint64(1); ; {
		raw, err := st.GetMsg(context.Background(), next, jetstream.WithGetMsgSubject(names.Event(session, events.SubjectName(events.TypeRunStarted))))
		if err != nil {
			return "?"
		}
		next = raw.Sequence + 1
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			continue
		}
		var d events.RunStartedData
		if events.DecodeData(ev, &d) == nil && d.Metadata.EnvelopeID == id {
			return strings.TrimPrefix(ev.Source(), "/bub/worker/")
		}
	}
}

func replyTo(out []outbound, id string) outbound {
	for _, o := range out {
		if o.env.InReplyTo == id {
			return o
		}
	}
	return outbound{}
}

func TestAdmissionProcessRunsConcurrently(t *testing.T) {
	s := startAdmissionStack(t, "process")
	slow := s.send(t, "adm:process", "slow question")
	s.running(t, "adm:process", 1)
	status, r := post(t, s.web, map[string]any{"content": "quick question", "session_id": "adm:process"}, "30s")
	if status != 200 || len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, "quick question") {
		t.Fatalf("quick turn: %d %+v", status, r)
	}
	out := s.replies(t, "adm:process", slow, r.ID)
	if replyTo(out, r.ID).seq > replyTo(out, slow).seq {
		t.Fatal("the second message waited for the running turn: process must run concurrently")
	}
	t.Logf("slow turn on %s, concurrent turn on %s", s.workerOf(t, "adm:process", slow), s.workerOf(t, "adm:process", r.ID))
}

func TestAdmissionDrop(t *testing.T) {
	s := startAdmissionStack(t, "drop")
	slow := s.send(t, "adm:drop", "slow question")
	s.running(t, "adm:drop", 1)
	status, r := post(t, s.web, map[string]any{"content": "please drop me", "session_id": "adm:drop"}, "30s")
	if status != 200 || len(r.Outbounds) != 1 {
		t.Fatalf("dropped message: %d %+v", status, r)
	}
	if o := r.Outbounds[0]; o.Kind != envelope.KindError || !strings.Contains(o.Content, "dropped") || o.InReplyTo != r.ID {
		t.Fatalf("drop answer %+v", o)
	}
	s.replies(t, "adm:drop", slow)
	for _, req := range s.fake.Requests() {
		if strings.Contains(req.LastUserText(), "drop me") {
			t.Fatal("the dropped message reached the model")
		}
	}
	names := subjects.Default()
	st, err := s.js.Stream(context.Background(), names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(context.Background(), names.Event("adm:drop", events.SubjectName(events.TypeTurnDropped)))
	if err != nil {
		t.Fatalf("no turn.dropped event: %v", err)
	}
	ev, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	var d events.TurnDroppedData
	if err := events.DecodeData(ev, &d); err != nil || d.EnvelopeID != r.ID {
		t.Fatalf("turn.dropped %+v %v", d, err)
	}
	t.Logf("slow turn on %s, drop decided on %s", s.workerOf(t, "adm:drop", slow), ev.Source())
}

func TestAdmissionFollowUpOrder(t *testing.T) {
	s := startAdmissionStack(t, "follow_up")
	session := "adm:follow"
	slow := s.send(t, session, "slow question")
	s.running(t, session, 1)
	ids := []string{slow}
	for _, c := range []string{"follow one", "follow two", "follow three"} {
		ids = append(ids, s.send(t, session, c))
	}
	out := s.replies(t, session, ids...)
	var order []string
	for _, o := range out {
		order = append(order, o.env.InReplyTo)
	}
	if !slices.Equal(order, ids) {
		t.Fatalf("replies in order %v, want arrival order %v", order, ids)
	}
	var asked []string
	for _, req := range s.fake.Requests() {
		asked = append(asked, req.LastUserText())
	}
	want := []string{"slow question", "follow one", "follow two", "follow three"}
	if len(asked) != len(want) {
		t.Fatalf("model saw %q, want %q", asked, want)
	}
	for i := range want {
		if !strings.Contains(asked[i], want[i]) {
			t.Fatalf("model request %d is %q, want %q (requests %q)", i, asked[i], want[i], asked)
		}
	}
	for _, id := range ids {
		t.Logf("%s ran on %s", id, s.workerOf(t, session, id))
	}
}

func TestAdmissionSteerReachesTheRunningTurn(t *testing.T) {
	steerReachesTheRunningTurn(t, startAdmissionStack(t, "steer"), "adm:steer")
}

// TestAdmissionCLIChannelSteers: with no BUB_ADMISSION policy the
// builtin's admit_message delegates to the message's channel, and the cli
// channel steers a line typed while its session runs a turn into that
// turn (Bub's CLI channel).
func TestAdmissionCLIChannelSteers(t *testing.T) {
	s := startAdmissionStack(t, "")
	s.channel = "cli"
	steerReachesTheRunningTurn(t, s, "adm:cli")
}

// steerReachesTheRunningTurn sends a slow message and, while its model
// call runs, a second one that must be steered into that turn.
func steerReachesTheRunningTurn(t *testing.T, s *admissionStack, session string) {
	t.Helper()
	channel := cmp.Or(s.channel, "http")
	slow := s.send(t, session, "slow question")
	s.running(t, session, 1)
	// Steer while the slow step's model call runs: after the step's first
	// drain, so the message must join at the step's end.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.fake.WaitRequests(ctx, 1); err != nil {
		t.Fatalf("the slow step's model call never came: %v", err)
	}
	steered := s.send(t, session, "also mention the kiwi")
	out := s.replies(t, session, slow)
	reqs := s.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2 (the slow step, then the step with the steering message)", len(reqs))
	}
	if !hasMessage(reqs[1], "also mention the kiwi") || !hasMessage(reqs[1], "slow done.") {
		t.Fatalf("the running turn's next request lacks its first answer or the steering message: %+v", reqs[1].Messages)
	}
	// Steered input is built like any prompt (build_prompt): its
	// context line and date line come before the text.
	if !hasMessage(reqs[1], "channel=$"+channel) || !hasMessage(reqs[1], "---\nalso mention the kiwi") {
		t.Fatalf("the steering message reached the model without its context and date lines: %+v", reqs[1].Messages)
	}
	if len(out) != 1 {
		t.Fatalf("replies %+v: the steered message must join the running turn, not get a turn of its own", out)
	}
	names := subjects.Default()
	st, err := s.js.Stream(context.Background(), names.SteerStream())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0, "steering message still queued"
	})
	t.Logf("turn on %s took steering message %s", s.workerOf(t, session, slow), steered)
}

func TestAdmissionLateSteerBecomesAFollowUp(t *testing.T) {
	s := startAdmissionStack(t, "steer")
	session := "adm:late"
	// A command turn has no agent loop, so it never drains steering.
	cmd := s.send(t, session, ",bash cmd='sleep 5'")
	s.running(t, session, 1)
	status, r := post(t, s.web, map[string]any{"content": "late steering message", "session_id": session}, "60s")
	if status != 200 || len(r.Outbounds) != 1 || !strings.Contains(r.Outbounds[0].Content, "late steering message") {
		t.Fatalf("late steering message: %d %+v", status, r)
	}
	out := s.replies(t, session, cmd, r.ID)
	if replyTo(out, cmd).seq > replyTo(out, r.ID).seq {
		t.Fatal("the late steering message ran before the turn it was steered into ended")
	}
	t.Logf("command on %s, follow-up on %s", s.workerOf(t, session, cmd), s.workerOf(t, session, r.ID))
}

func hasMessage(req fakellm.Request, text string) bool {
	for _, m := range req.Messages {
		if strings.Contains(m.Content.PlainText(), text) {
			return true
		}
	}
	return false
}
