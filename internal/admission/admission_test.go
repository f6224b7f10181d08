package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// testHooks resolves the envelope's session id and answers admit_message
// for a busy session with a fixed decision, else process. With none set it
// implements no admit_message (a worker with the default policy).
type testHooks struct {
	action hooks.AdmitAction
	none   bool
	mu     sync.Mutex
	snaps  []hooks.TurnSnapshot
	errs   []string
}

func (h *testHooks) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, error) {
	return in.Message.SessionID, nil
}

func (h *testHooks) AdmitMessage(_ context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, error) {
	h.mu.Lock()
	h.snaps = append(h.snaps, in.Turn)
	h.mu.Unlock()
	if h.action == "" || !in.Turn.IsRunning && in.Turn.PendingCount == 0 {
		return hooks.AdmitDecision{Action: hooks.AdmitProcess}, nil
	}
	return hooks.AdmitDecision{Action: h.action}, nil
}

func (h *testHooks) MayAdmit(*envelope.Envelope) bool { return !h.none }

func (h *testHooks) NotifyError(_ context.Context, in hooks.OnErrorInput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, in.Stage)
}

// outbox collects outbound envelopes.
type outbox struct {
	mu    sync.Mutex
	out   []*envelope.Envelope
	fails int // sends that fail first
}

func (o *outbox) Send(_ context.Context, env *envelope.Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fails > 0 {
		o.fails--
		return errors.New("simulated outbox failure")
	}
	o.out = append(o.out, env)
	return nil
}

// turns is the next processor: each turn blocks until released, draining
// its steering inbox first when drain is set.
type turns struct {
	drain bool
	// handBack: envelopes whose first delivery is handed back
	// (worker.ErrRetry) once released.
	handBack map[string]bool

	mu       sync.Mutex
	started  []string
	finished []string
	steered  map[string][]string
	gates    map[string]chan struct{}
}

func newTurns() *turns {
	return &turns{steered: map[string][]string{}, gates: map[string]chan struct{}{}}
}

func (p *turns) gate(id string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.gates[id]
	if !ok {
		g = make(chan struct{})
		p.gates[id] = g
	}
	return g
}

func (p *turns) release(id string) { close(p.gate(id)) }

func (p *turns) Process(ctx context.Context, in worker.Inbound) error {
	id := in.Envelope.ID
	if err := in.Admitted(); err != nil { // what the worker's runtime does before the first stage
		return err
	}
	p.mu.Lock()
	p.started = append(p.started, id)
	p.mu.Unlock()
	select {
	case <-p.gate(id):
	case <-ctx.Done():
		return ctx.Err()
	}
	if s := in.Steering; s != nil && p.drain {
		msgs, err := s.Drain(ctx)
		if err != nil {
			return err
		}
		p.mu.Lock()
		for _, m := range msgs {
			p.steered[id] = append(p.steered[id], m.Content)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.finished = append(p.finished, id)
	p.mu.Unlock()
	if p.handBack[id] && in.Delivery == 1 {
		return fmt.Errorf("%w: flushing events: simulated", worker.ErrRetry)
	}
	return nil
}

func (p *turns) snapshot() (started, finished []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.started), slices.Clone(p.finished)
}

type fixture struct {
	js    jetstream.JetStream
	names subjects.Names
	gate  *Gate
	hooks *testHooks
	out   *outbox
	turns *turns
}

// topology starts a server with the streams and buckets, turn keys
// living a second.
func topology(t *testing.T) (jetstream.JetStream, subjects.Names) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	names := subjects.Default()
	if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{MemoryStorage: true, TurnTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	return js, names
}

func newFixture(t *testing.T, action hooks.AdmitAction) *fixture {
	t.Helper()
	js, names := topology(t)
	ctx := t.Context()
	f := &fixture{js: js, names: names, hooks: &testHooks{action: action}, out: &outbox{}, turns: newTurns()}
	g, err := NewGate(ctx, Options{JS: js, Names: names, Source: events.Source("worker", "test"), Hooks: f.hooks, Outbox: f.out, Next: f.turns, TTL: time.Second, Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	f.gate = g
	return f
}

var seq uint64

func inbound(id, session string) worker.Inbound {
	seq++
	return worker.Inbound{Envelope: &envelope.Envelope{ID: id, SessionID: session, Channel: "http", Content: "content of " + id}, Delivery: 1, StreamSeq: seq}
}

// process runs g.Process in a goroutine and returns its result channel.
func (f *fixture) process(in worker.Inbound) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.gate.Process(context.Background(), in) }()
	return done
}

func (f *fixture) waitStarted(t *testing.T, ids ...string) {
	t.Helper()
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		started, _ := f.turns.snapshot()
		return slices.Equal(started, ids), fmt.Sprintf("started %v, want %v", started, ids)
	})
}

// notRun processes in and fails with why unless it returns within 5 s
// without running a turn (a turn of it would block until released).
func (f *fixture) notRun(t *testing.T, in worker.Inbound, why string) {
	t.Helper()
	select {
	case err := <-f.process(in):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		f.turns.release(in.Envelope.ID)
		t.Fatal(why)
	}
}

func wait(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("process: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("turn did not finish")
	}
}

func TestProcessRunsConcurrentlyAndSnapshotCounts(t *testing.T) {
	f := newFixture(t, "")
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	b := f.process(inbound("b", "s"))
	f.waitStarted(t, "a", "b")
	snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.IsRunning || snap.RunningCount != 2 || snap.PendingCount != 0 {
		t.Fatalf("snapshot %+v, want two running", snap)
	}
	f.turns.release("a")
	f.turns.release("b")
	wait(t, a)
	wait(t, b)
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
		return err == nil && !snap.IsRunning, fmt.Sprintf("%+v %v", snap, err)
	})
	if got := f.hooks.snaps[1]; !got.IsRunning || got.RunningCount != 1 {
		t.Fatalf("second admission saw %+v, want one running turn", got)
	}
}

func TestFollowUpsRunInArrivalOrderAfterTheRunningTurn(t *testing.T) {
	f := newFixture(t, hooks.AdmitFollowUp)
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	var later []<-chan error
	for _, id := range []string{"b", "c", "d"} {
		later = append(later, f.process(inbound(id, "s")))
		natstest.Eventually(t, 5*time.Second, func() (bool, string) {
			snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
			return err == nil && snap.PendingCount == len(later), fmt.Sprintf("%+v %v", snap, err)
		})
	}
	// Another session is not held up.
	other := f.process(inbound("x", "other"))
	f.waitStarted(t, "a", "x")
	f.turns.release("x")
	wait(t, other)

	for _, id := range []string{"a", "b", "c", "d"} {
		f.turns.release(id)
	}
	wait(t, a)
	for _, d := range later {
		wait(t, d)
	}
	started, finished := f.turns.snapshot()
	if want := []string{"a", "x", "b", "c", "d"}; !slices.Equal(started, want) {
		t.Fatalf("started %v, want %v", started, want)
	}
	if want := []string{"x", "a", "b", "c", "d"}; !slices.Equal(finished, want) {
		t.Fatalf("finished %v, want %v", finished, want)
	}
}

func TestFollowUpWaitsForEachTurnToFinish(t *testing.T) {
	f := newFixture(t, hooks.AdmitFollowUp)
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	b := f.process(inbound("b", "s"))
	c := f.process(inbound("c", "s"))
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		snap, _ := f.gate.Snapshot(t.Context(), "s", "", 0)
		return snap.PendingCount == 2, fmt.Sprintf("%+v", snap)
	})
	f.turns.release("a")
	wait(t, a)
	f.waitStarted(t, "a", "b") // c waits for b
	f.turns.release("b")
	wait(t, b)
	f.waitStarted(t, "a", "b", "c")
	f.turns.release("c")
	wait(t, c)
}

func TestDropAnswersTheSenderAndRecordsAnEvent(t *testing.T) {
	f := newFixture(t, hooks.AdmitDrop)
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), inbound("b", "s")); err != nil {
		t.Fatal(err)
	}
	f.turns.release("a")
	wait(t, a)
	if started, _ := f.turns.snapshot(); !slices.Equal(started, []string{"a"}) {
		t.Fatalf("started %v: the dropped message ran", started)
	}
	if len(f.out.out) != 1 {
		t.Fatalf("outbox %v, want one error envelope", f.out.out)
	}
	e := f.out.out[0]
	if e.ID != "b/0" || e.InReplyTo != "b" || e.Kind != envelope.KindError || e.BatchSize != 1 {
		t.Fatalf("drop reply %+v", e)
	}
	st, err := f.js.Stream(t.Context(), f.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), f.names.Event("s", events.SubjectName(events.TypeTurnDropped)))
	if err != nil {
		t.Fatalf("no turn.dropped event: %v", err)
	}
	ev, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	var d events.TurnDroppedData
	if err := events.DecodeData(ev, &d); err != nil || d.EnvelopeID != "b" {
		t.Fatalf("turn.dropped %+v %v", d, err)
	}
}

// TestHandedBackTurnKeepsItsAdmission: a turn handed back for a retry
// (worker.ErrRetry: its events could not be flushed) keeps its run key
// until its redelivery takes it over, as a dead worker's turn does: a
// message arriving meanwhile finds the session busy (here: dropped), and
// the redelivery is not decided again (it runs, and is not dropped).
func TestHandedBackTurnKeepsItsAdmission(t *testing.T) {
	f := newFixture(t, hooks.AdmitDrop)
	f.turns.handBack = map[string]bool{"a": true}
	a := inbound("a", "s")
	first := f.process(a)
	f.waitStarted(t, "a")
	f.turns.release("a")
	if err := <-first; !errors.Is(err, worker.ErrRetry) {
		t.Fatalf("first delivery of a: %v, want it handed back", err)
	}
	f.notRun(t, inbound("b", "s"), "b ran while a, handed back, still held the session")
	a.Delivery = 2
	if err := f.gate.Process(t.Context(), a); err != nil {
		t.Fatalf("redelivery of a: %v", err)
	}
	if started, _ := f.turns.snapshot(); !slices.Equal(started, []string{"a", "a"}) {
		t.Fatalf("started %v, want a twice (its redelivery admitted again) and b not at all", started)
	}
	if len(f.out.out) != 1 || f.out.out[0].InReplyTo != "b" {
		t.Fatalf("outbox %v, want only b's drop reply", f.out.out)
	}
}

func TestSteerReachesTheRunningTurn(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	f.turns.drain = true
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), inbound("b", "s")); err != nil {
		t.Fatal(err)
	}
	snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
	if err != nil || snap.SteeringCount != 1 {
		t.Fatalf("snapshot %+v %v, want one steering message", snap, err)
	}
	if !f.gate.reg.anyQueued("s") {
		t.Fatal("the snapshot counted the steering message, the drain would not look for it")
	}
	f.turns.release("a")
	wait(t, a)
	if got := f.turns.steered["a"]; !slices.Equal(got, []string{"content of b"}) {
		t.Fatalf("turn a drained %v", got)
	}
	if started, _ := f.turns.snapshot(); !slices.Equal(started, []string{"a"}) {
		t.Fatalf("started %v: the steered message also ran as a turn", started)
	}
	if n, err := f.gate.steer.Count(t.Context(), "s"); err != nil || n != 0 {
		t.Fatalf("steering messages left: %d %v", n, err)
	}
	// The message's queued marker went with it.
	if k, _, err := f.gate.reg.keys(t.Context(), "s"); err != nil || len(k.queued) != 0 {
		t.Fatalf("queued markers %v %v after the turn, want none", k.queued, err)
	}
}

func TestLateSteerBecomesAFollowUp(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	a := f.process(inbound("a", "s")) // never drains
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), inbound("b", "s")); err != nil {
		t.Fatal(err)
	}
	f.turns.release("a")
	wait(t, a)
	st, err := f.js.Stream(t.Context(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), f.names.Inbound("http"))
	if err != nil {
		t.Fatalf("steering message not re-injected: %v", err)
	}
	if raw.Header.Get(subjects.HeaderAdmission) != "follow_up" || raw.Header.Get(subjects.HeaderMsgID) != "b/follow_up" {
		t.Fatalf("re-injected headers %v", raw.Header)
	}
	env, err := DecodeSteer(raw.Header, raw.Data)
	if err != nil || env.ID != "b" || env.Content != "content of b" {
		t.Fatalf("re-injected %+v %v", env, err)
	}
	if n, _ := f.gate.steer.Count(t.Context(), "s"); n != 0 {
		t.Fatalf("%d steering messages left", n)
	}
	// The forced follow-up skips admit_message and runs (the session is idle).
	in := inbound("b", "s")
	in.Admission = "follow_up"
	before := len(f.hooks.snaps)
	done := f.process(in)
	f.waitStarted(t, "a", "b")
	f.turns.release("b")
	wait(t, done)
	if len(f.hooks.snaps) != before {
		t.Fatal("a forced follow-up went through admit_message")
	}
}

func TestSteerWithoutRunningTurnRunsLikeAFollowUp(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	done := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	f.turns.release("a")
	wait(t, done)
}

func TestDeadWorkersEntriesExpire(t *testing.T) {
	f := newFixture(t, "")
	l, err := f.gate.reg.hold(t.Context(), f.names.TurnRunKey("s", "dead"), entry{Envelope: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	l.stop() // the worker died: no more heartbeats, no removal
	snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
	if err != nil || snap.RunningCount != 1 {
		t.Fatalf("snapshot %+v %v, want the dead turn still counted", snap, err)
	}
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
		return err == nil && snap.RunningCount == 0, fmt.Sprintf("%+v %v", snap, err)
	})
}

func TestFollowUpStartsWhenTheDeadTurnExpires(t *testing.T) {
	f := newFixture(t, hooks.AdmitFollowUp)
	l, err := f.gate.reg.hold(t.Context(), f.names.TurnRunKey("s", "dead"), entry{Envelope: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	l.stop()
	done := f.process(inbound("b", "s"))
	f.waitStarted(t, "b")
	f.turns.release("b")
	wait(t, done)
}

func TestHeartbeatKeepsALiveTurn(t *testing.T) {
	f := newFixture(t, "")
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	deadline := time.Now().Add(3 * time.Second) // three TTLs
	for time.Now().Before(deadline) {
		snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
		if err != nil || snap.RunningCount != 1 {
			t.Fatalf("live turn lost from the registry: %+v %v", snap, err)
		}
	}
	f.turns.release("a")
	wait(t, a)
}

func TestRedeliveredDoneEnvelopeIsSkipped(t *testing.T) {
	f := newFixture(t, "")
	in := inbound("a", "s")
	done := f.process(in)
	f.waitStarted(t, "a")
	f.turns.release("a")
	wait(t, done)
	in.Delivery = 2 // the ack was lost
	if err := f.gate.Process(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if started, _ := f.turns.snapshot(); len(started) != 1 {
		t.Fatalf("started %v: a finished envelope ran again", started)
	}
}

func TestStoppingHandsBackAWaitingFollowUpKeepingItsPlace(t *testing.T) {
	f := newFixture(t, hooks.AdmitFollowUp)
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	stopping := make(chan struct{})
	b := inbound("b", "s")
	b.Stopping = stopping
	res := f.process(b)
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		snap, _ := f.gate.Snapshot(t.Context(), "s", "", 0)
		return snap.PendingCount == 1, fmt.Sprintf("%+v", snap)
	})
	close(stopping)
	select {
	case err := <-res:
		if !errors.Is(err, worker.ErrRetry) {
			t.Fatalf("stopping follow-up returned %v, want a retry", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting follow-up ignored the stop")
	}
	// The redelivery keeps the follow-up decision although admit_message
	// would now say process.
	f.hooks.action = hooks.AdmitProcess
	b.Stopping, b.Delivery = nil, 2
	res = f.process(b)
	f.turns.release("a")
	wait(t, a)
	f.waitStarted(t, "a", "b")
	f.turns.release("b")
	wait(t, res)
}

func TestParsePolicy(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want string
		err  bool
	}{
		{spec: "", want: ""},
		{spec: "steer", want: "steer"},
		{spec: "cli:steer,http:follow_up", want: "cli:steer,http:follow_up"},
		{spec: " cli:steer , drop ", want: "cli:steer,drop"},
		{spec: "*:process", want: "process"},
		{spec: "later", err: true},
		{spec: ":steer", err: true},
		{spec: "cli:wait", err: true},
	} {
		p, err := ParsePolicy(tt.spec)
		if (err != nil) != tt.err {
			t.Errorf("%q: err %v", tt.spec, err)
			continue
		}
		if tt.err {
			continue
		}
		got := ""
		if p != nil {
			got = p.String()
		}
		if got != tt.want {
			t.Errorf("%q parsed as %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestPolicyDecidesOnlyForBusySessions(t *testing.T) {
	p, err := ParsePolicy("cli:steer,http:drop")
	if err != nil {
		t.Fatal(err)
	}
	busy := hooks.TurnSnapshot{IsRunning: true, RunningCount: 1}
	for _, tt := range []struct {
		channel string
		turn    hooks.TurnSnapshot
		want    hooks.AdmitAction
		ok      bool
	}{
		{channel: "cli", turn: busy, want: hooks.AdmitSteer, ok: true},
		{channel: "http", turn: busy, want: hooks.AdmitDrop, ok: true},
		{channel: "telegram", turn: busy},
		{channel: "cli"},
		{channel: "http", turn: hooks.TurnSnapshot{PendingCount: 1}, want: hooks.AdmitDrop, ok: true},
	} {
		d, ok, err := p.AdmitMessage(t.Context(), hooks.AdmitMessageInput{Message: &envelope.Envelope{Channel: tt.channel}, Turn: tt.turn})
		if err != nil || ok != tt.ok || d.Action != tt.want {
			t.Errorf("%s %+v: %+v %v %v", tt.channel, tt.turn, d, ok, err)
		}
	}
}

// The policy may decide only for channels whose action is not process,
// so BUB_ADMISSION=process costs a turn what no policy costs.
func TestPolicyMayAdmit(t *testing.T) {
	for spec, want := range map[string]map[string]bool{
		"process":                    {"cli": false, "http": false},
		"cli:steer":                  {"cli": true, "http": false},
		"cli:steer,http:process":     {"cli": true, "http": false},
		"follow_up,telegram:process": {"cli": true, "http": true, "telegram": false},
	} {
		p, err := ParsePolicy(spec)
		if err != nil {
			t.Fatal(err)
		}
		for channel, may := range want {
			if got := p.MayAdmit(&envelope.Envelope{Channel: channel}); got != may {
				t.Errorf("%q: MayAdmit(%s) = %v, want %v", spec, channel, got, may)
			}
		}
	}
}

// registeredCheck is a next processor that, at its first stage (after
// Admitted, as the worker's runtime), reads its own run key back.
type registeredCheck struct {
	reg   func() *Registry
	names subjects.Names
	found chan bool
}

func (p *registeredCheck) Process(ctx context.Context, in worker.Inbound) error {
	if err := in.Admitted(); err != nil {
		return err
	}
	_, ok, err := p.reg().exists(ctx, p.names.TurnRunKey(in.Session, in.Envelope.ID))
	if err != nil {
		return err
	}
	p.found <- ok
	return nil
}

// TestTurnIsRegisteredBeforeItsFirstStage: the run key is written while
// the runtime reads the session (both before the first stage), and
// Admitted returns only once it is stored, so quit and other workers'
// follow-ups see every turn that has started.
func TestTurnIsRegisteredBeforeItsFirstStage(t *testing.T) {
	js, names := topology(t)
	ctx := t.Context()
	var g *Gate
	next := &registeredCheck{reg: func() *Registry { return g.reg }, names: names, found: make(chan bool, 1)}
	g, err := NewGate(ctx, Options{JS: js, Names: names, Source: events.Source("worker", "test"), Hooks: &testHooks{none: true}, Outbox: &outbox{}, Next: next, TTL: time.Second, Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Process(ctx, inbound("a", "s")); err != nil {
		t.Fatal(err)
	}
	if !<-next.found {
		t.Fatal("the turn's first stage ran before its run key was stored")
	}
	if _, ok, err := g.reg.exists(ctx, names.TurnRunKey("s", "a")); err != nil || ok {
		t.Fatalf("run key after the turn: present %v (%v), want gone", ok, err)
	}
}

// TestSteeredMessageRedeliveredIsNotRunAgain: b is steered into running
// turn a, which takes it; b's inbound message is then delivered again (its
// acknowledgement was lost, or its worker died after steering it). The
// redelivery finds b steered and does nothing: b never runs as a turn of
// its own, which would answer it twice.
func TestSteeredMessageRedeliveredIsNotRunAgain(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	f.turns.drain = true
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	b := inbound("b", "s")
	if err := f.gate.Process(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	f.turns.release("a")
	wait(t, a)
	if got := f.turns.steered["a"]; !slices.Equal(got, []string{"content of b"}) {
		t.Fatalf("turn a took %v, want b", got)
	}
	b.Delivery = 2
	f.notRun(t, b, "b, already taken by turn a, ran again as a turn of its own")
	if started, _ := f.turns.snapshot(); !slices.Equal(started, []string{"a"}) {
		t.Fatalf("started %v, want only a", started)
	}
}

// TestDroppedMessageRedeliveredIsDroppedAgain: b is dropped while a runs,
// but its error reply cannot be sent, so b is handed back; by its
// redelivery the session is idle. The drop stands: b is dropped again
// (its turn.dropped event and reply keep their ids) and never runs after
// its event said it was dropped.
func TestDroppedMessageRedeliveredIsDroppedAgain(t *testing.T) {
	f := newFixture(t, hooks.AdmitDrop)
	f.out.fails = 1
	a := f.process(inbound("a", "s"))
	f.waitStarted(t, "a")
	b := inbound("b", "s")
	if err := f.gate.Process(t.Context(), b); !errors.Is(err, worker.ErrRetry) {
		t.Fatalf("drop with a failing outbox: %v, want it handed back", err)
	}
	f.turns.release("a")
	wait(t, a)
	b.Delivery = 2
	f.notRun(t, b, "b, dropped (turn.dropped published), ran on its redelivery")
	if started, _ := f.turns.snapshot(); !slices.Equal(started, []string{"a"}) {
		t.Fatalf("started %v, want only a", started)
	}
	if len(f.out.out) != 1 || f.out.out[0].ID != "b/0" {
		t.Fatalf("outbox %v, want b's drop reply", f.out.out)
	}
}

// TestAbandonedSteeringClaimIsSwept: turn a takes steering message b and
// is handed back, which keeps b's claim for the redelivery; the
// redelivery ends without taking b. The claim's turn no longer runs, so
// the sweep at its end re-injects b as a follow-up at once, instead of
// leaving it in the steering stream past the claim's TTL until the
// session's next message.
func TestAbandonedSteeringClaimIsSwept(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	f.turns.drain = true
	f.turns.handBack = map[string]bool{"a": true}
	a := inbound("a", "s")
	first := f.process(a)
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), inbound("b", "s")); err != nil {
		t.Fatal(err)
	}
	f.turns.release("a")
	if err := <-first; !errors.Is(err, worker.ErrRetry) {
		t.Fatalf("first delivery of a: %v, want it handed back", err)
	}
	if got := f.turns.steered["a"]; !slices.Equal(got, []string{"content of b"}) {
		t.Fatalf("a took %v, want b", got)
	}
	f.turns.drain = false // the redelivery does not take b
	a.Delivery = 2
	if err := f.gate.Process(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(t.Context(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		n, err := f.gate.steer.Count(t.Context(), "s")
		_, rerr := st.GetLastMsgForSubject(t.Context(), f.names.Inbound("http"))
		return err == nil && n == 0 && rerr == nil, fmt.Sprintf("%d steering messages left (%v), re-injected: %v", n, err, rerr == nil)
	})
}
