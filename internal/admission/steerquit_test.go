package admission

// Steering and ,quit on rare interleavings: a steering message from
// before a quit, a mirror that cannot answer, a sweep racing a starting
// turn, a removal that fails, a message from after a quit taken by a turn
// the quit stops. Each test failed before its fix (cb5f4fb's review); the
// comment above it says what went wrong and what is expected.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// reinjected returns the inbound delivery of the forced follow-up that the
// sweep re-injected for envelope id (fails when there is none).
func (f *fixture) reinjected(t *testing.T, id string) worker.Inbound {
	t.Helper()
	st, err := f.js.Stream(t.Context(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), f.names.Inbound("http"))
	if err != nil {
		t.Fatalf("no re-injected follow-up of %s: %v", id, err)
	}
	if raw.Header.Get(subjects.HeaderAdmission) != string(followUp) {
		t.Fatalf("last inbound message %q is not a re-injected follow-up (headers %v)", raw.Data, raw.Header)
	}
	env, err := DecodeSteer(raw.Header, raw.Data)
	if err != nil || env.ID != id {
		t.Fatalf("re-injected %+v %v, want %s", env, err, id)
	}
	in := worker.Inbound{Envelope: env, Delivery: 1, StreamSeq: raw.Sequence, Admission: raw.Header.Get(subjects.HeaderAdmission)}
	in.Arrived, _ = strconv.ParseUint(raw.Header.Get(subjects.HeaderArrived), 10, 64)
	return in
}

// followUps counts the forced follow-ups of envelope id stored in the
// inbound stream: each would run as a turn.
func (f *fixture) followUps(t *testing.T, id string) int {
	t.Helper()
	st, err := f.js.Stream(t.Context(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for next := uint64(1); ; {
		raw, err := st.GetMsg(t.Context(), next, jetstream.WithGetMsgSubject(f.names.Inbound("http")))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		next = raw.Sequence + 1
		if raw.Header.Get(subjects.HeaderAdmission) != string(followUp) {
			continue
		}
		if env, err := DecodeSteer(raw.Header, raw.Data); err == nil && env.ID == id {
			n++
		}
	}
}

// TestSteeredBeforeQuitIsDroppedWhenSwept: ,quit stops "what came before
// it, wherever it waits", but a steering message waiting in BUB_STEER is
// not covered by the quit marker.
//
// Interleaving: a runs; b (stored before the quit) is steered into the
// session (a running) and acknowledged; q runs and calls Quit, which stops
// a (a never drained b). a's end-of-turn sweep skips (q's run key lives);
// q's end-of-turn sweep re-injects b into the inbound stream as a forced
// follow-up at a NEW inbound sequence, higher than the quit marker's
// before. The quit check (gate.go:156, quitBefore/quitStops in
// registry.go:404-406) compares that new sequence with the marker and lets
// b run, as a fresh turn, after the quit that came after it.
//
// Expected: b, a message stored before the quit, never runs after it
// (dropped with reason "quit", as a handed-back follow-up is).
func TestSteeredBeforeQuitIsDroppedWhenSwept(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	a := f.process(f.stored(t, "a", "s"))
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), f.stored(t, "b", "s")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.gate.steer.Count(t.Context(), "s"); err != nil || n != 1 {
		t.Fatalf("b not steered: %d steering messages (%v)", n, err)
	}
	f.hooks.action = hooks.AdmitProcess
	q := f.process(f.stored(t, "q", "s"))
	f.waitStarted(t, "a", "q")
	if err := f.gate.Quit(context.Background(), "s", "q"); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	wait(t, a) // stopped by the quit
	f.turns.release("q")
	wait(t, q) // its end sweeps b back into the inbound stream
	b := f.reinjected(t, "b")
	f.notRun(t, b, "b, stored (and steered) before the quit, ran after it as a re-injected follow-up")
}

// TestQuitMarkerInTheFallbackListing: when the registry
// mirror cannot answer (a stalled or reconnecting watch: errMirrorBehind,
// or an ended watch), Registry.keys falls back to listKeys, whose watch
// filter (registry.go:229) lists run, wait and queued keys but not the
// quit markers. quitBefore (gate.go:440-449), which for a redelivery
// promises an exact answer, then gets quitAt() == 0 and lets a message
// from before the quit run; the run key's check in run (gate.go:391) uses
// the same stale mirror and does not stop it either.
//
// Interleaving: late is stored; q runs; the mirror stops answering (here:
// its watch is stopped, which is what the fallback exists for); q calls
// Quit (which succeeds through the fallback); late is then redelivered
// (Delivery 2: its first delivery was handed back before registering).
//
// Expected: late is dropped with reason "quit", never run.
func TestQuitMarkerInTheFallbackListing(t *testing.T) {
	f := newFixture(t, "")
	late := f.stored(t, "late", "s") // before the quit
	q := f.process(f.stored(t, "q", "s"))
	f.waitStarted(t, "q")
	f.gate.reg.live.stop() // the mirror cannot answer: keys falls back to listKeys
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		f.gate.reg.live.mu.Lock()
		defer f.gate.reg.live.mu.Unlock()
		return f.gate.reg.live.ended != nil, "mirror still running"
	})
	if err := f.gate.Quit(context.Background(), "s", "q"); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	late.Delivery = 2
	f.notRun(t, late, "late, stored before the quit and redelivered after it, ran: the fallback listing has no quit marker")
	f.turns.release("q")
	wait(t, q)
}

// hookedJS is a JetStream whose inbound follow-up publishes and steering
// stream deletes the test can hold or fail.
type hookedJS struct {
	jetstream.JetStream
	steerStream string
	// onFollowUp, when set, is called before a re-injected follow-up is
	// published.
	onFollowUp func()
	// deleteFails is how many steering-stream deletes fail first.
	mu          sync.Mutex
	deleteFails int
}

func (j *hookedJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if m.Header.Get(subjects.HeaderAdmission) == string(followUp) && j.onFollowUp != nil {
		j.onFollowUp()
	}
	return j.JetStream.PublishMsg(ctx, m, opts...)
}

func (j *hookedJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	st, err := j.JetStream.Stream(ctx, name)
	if err != nil || name != j.steerStream {
		return st, err
	}
	return &hookedStream{Stream: st, js: j}, nil
}

type hookedStream struct {
	jetstream.Stream
	js *hookedJS
}

func (s *hookedStream) DeleteMsg(ctx context.Context, seq uint64) error {
	s.js.mu.Lock()
	fail := s.js.deleteFails > 0
	if fail {
		s.js.deleteFails--
	}
	s.js.mu.Unlock()
	if fail {
		return errors.New("simulated steering delete failure (timeout)")
	}
	return s.Stream.DeleteMsg(ctx, seq)
}

// hookSteering makes the gate's steering queue use a hooked JetStream.
func (f *fixture) hookSteering() *hookedJS {
	j := &hookedJS{JetStream: f.js, steerStream: f.names.SteerStream()}
	f.gate.steer = NewSteering(j, f.names, f.gate.reg, f.gate.o.Source, nil)
	return j
}

// holdingHooks blocks admit_message of one envelope until released.
type holdingHooks struct {
	*testHooks
	id       string
	entered  chan struct{}
	release  chan struct{}
	decision hooks.AdmitAction
}

func (h *holdingHooks) AdmitMessage(ctx context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, error) {
	if in.Message.ID != h.id {
		return h.testHooks.AdmitMessage(ctx, in)
	}
	close(h.entered)
	<-h.release
	return hooks.AdmitDecision{Action: h.decision}, nil
}

// TestSweepAndAStartingTurnTakeAMessageOnce: Steering.Sweep (steer.go:187-206)
// checks a message's claim key and then re-injects and removes it, and
// Inbox.Drain (steer.go:278-294) checks the claim key and then writes it
// with a blind put; nothing makes the two exclusive. sweepIfIdle
// (gate.go:501-518) only checked, before the sweep, that no run key was
// live: a turn of the session that registers just after that check drains
// and takes the message while the sweep re-injects it.
//
// Interleaving: a runs; b is steered; c is admitted (process) while a
// still runs, and is slow to register (held here in admit_message); a
// ends, its sweepIfIdle sees no run key and Sweep finds b unclaimed, and is
// about to publish the follow-up (held here); c registers, runs and drains
// b (its claim check finds nothing), finishes and commits; the sweep's
// publish then goes out and b is re-injected.
//
// Expected: b runs once (taken by c, or re-injected, not both). Actual: b
// is part of c's turn and also runs as a forced follow-up of its own.
func TestSweepAndAStartingTurnTakeAMessageOnce(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	j := f.hookSteering()
	h := &holdingHooks{testHooks: f.hooks, id: "c", entered: make(chan struct{}), release: make(chan struct{}), decision: hooks.AdmitProcess}
	f.gate.o.Hooks = h
	a := f.process(f.stored(t, "a", "s"))
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), f.stored(t, "b", "s")); err != nil {
		t.Fatal(err)
	}
	c := f.process(f.stored(t, "c", "s"))
	<-h.entered // c decided while a runs, not yet registered

	sweeping, publish := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	j.onFollowUp = func() {
		if first.CompareAndSwap(false, true) { // a's sweep waits; later ones go on
			close(sweeping)
			<-publish
		}
	}
	f.turns.release("a")
	select {
	case <-sweeping: // a's end-of-turn sweep found b unclaimed
	case <-time.After(10 * time.Second):
		t.Fatal("a's end-of-turn sweep did not re-inject b")
	}
	f.turns.drain = true
	close(h.release)
	f.waitStarted(t, "a", "c")
	f.turns.release("c")
	wait(t, c)
	close(publish)
	wait(t, a)
	took := len(f.turns.steered["c"])
	if n := f.followUps(t, "b"); took+n != 1 {
		t.Fatalf("b taken by c %d times and re-injected as a follow-up %d times, want once in all", took, n)
	}
}

// TestTakenSteeringMessageWhoseRemovalFailedNeverRunsAgain: Inbox.Commit
// (steer.go:318-328) removes each claimed steering message and ends its
// claim lease whatever the removal returned; the error is only logged
// (gate.go:421-423). When the delete fails (a timeout, a leader
// election), the message the finished turn took stays in BUB_STEER with no
// claim, and the same turn's end-of-turn sweep (gate.go:432 -> 513)
// re-injects it as a forced follow-up: it runs a second time. (Keeping the
// claim instead of ending it would not help: Sweep's ownerRuns
// (steer.go:214-221) treats a claim whose turn no longer runs as
// abandoned.)
//
// Expected: a steering message a finished turn took never runs again.
func TestTakenSteeringMessageWhoseRemovalFailedNeverRunsAgain(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	j := f.hookSteering()
	f.turns.drain = true
	a := f.process(f.stored(t, "a", "s"))
	f.waitStarted(t, "a")
	if err := f.gate.Process(t.Context(), f.stored(t, "b", "s")); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.deleteFails = 1 // Commit's delete of b
	j.mu.Unlock()
	f.turns.release("a")
	wait(t, a)
	if got := f.turns.steered["a"]; !slices.Equal(got, []string{"content of b"}) {
		t.Fatalf("a took %v, want b", got)
	}
	if n := f.followUps(t, "b"); n != 0 {
		t.Fatalf("b, taken by finished turn a, was re-injected %d times after its delete failed", n)
	}
	// The next sweep removes it, without running it.
	if _, err := f.gate.steer.Sweep(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if left, err := f.gate.steer.Count(t.Context(), "s"); err != nil || left != 0 || f.followUps(t, "b") != 0 {
		t.Fatalf("after a sweep: %d steering messages left (%v), %d follow-ups of b; want b removed and not run", left, err, f.followUps(t, "b"))
	}
}

// quitHeldJS holds the write of quit markers until released.
type quitHeldJS struct {
	jetstream.JetStream
	entered, release chan struct{}
	once             sync.Once
}

func (j *quitHeldJS) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if strings.Contains(subject, ".quit.") {
		j.once.Do(func() {
			close(j.entered)
			<-j.release
		})
	}
	return j.JetStream.Publish(ctx, subject, data, opts...)
}

// drainingTurns is a next processor whose turn "a" drains its steering
// inbox every few milliseconds until it is cancelled (an agent loop asking
// MessagesPending between steps), and whose other turns block until
// released.
type drainingTurns struct {
	*turns
	mu     sync.Mutex
	took   []string
	taking chan struct{}
}

func (p *drainingTurns) Process(ctx context.Context, in worker.Inbound) error {
	if in.Envelope.ID != "a" {
		return p.turns.Process(ctx, in)
	}
	if err := in.Admitted(); err != nil {
		return err
	}
	for {
		msgs, _ := in.Steering.Drain(ctx)
		for _, m := range msgs {
			p.mu.Lock()
			p.took = append(p.took, m.ID)
			p.mu.Unlock()
			close(p.taking)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSteeringAfterQuitGivenBackByAStoppedTurn: a message stored after
// the quit (its inbound sequence is at or above the marker's before) should
// "run as usual", but when it is steered and drained by a turn that the
// quit then stops, the stopped turn's Inbox.Commit (gate.go:421, reached
// for quit as for a finished turn) deletes it from BUB_STEER: it is never
// answered, never re-injected, never run.
//
// Interleaving: a (before the quit) runs and drains between steps; q runs
// and calls Quit, which reads the inbound stream's last sequence (before);
// before its broadcast reaches a (held here at the marker write, normally
// a round trip or two), n is stored, steered into the session and drained
// by a; the broadcast stops a, whose Commit removes n.
//
// Expected: n, which came after the quit, runs (a stopped turn should give
// back the steering messages from after the quit: release their claims
// and re-inject them), as the doc promises for later messages.
func TestSteeringAfterQuitGivenBackByAStoppedTurn(t *testing.T) {
	f := newFixture(t, hooks.AdmitSteer)
	next := &drainingTurns{turns: f.turns, taking: make(chan struct{})}
	f.gate.o.Next = next
	held := &quitHeldJS{JetStream: f.gate.reg.js, entered: make(chan struct{}), release: make(chan struct{})}
	f.gate.reg.js = held

	a := f.process(f.stored(t, "a", "s"))
	f.hooks.action = hooks.AdmitProcess
	q := f.process(f.stored(t, "q", "s"))
	f.waitStarted(t, "q")
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
		return err == nil && snap.RunningCount == 2, fmt.Sprintf("%+v %v", snap, err)
	})
	quit := make(chan error, 1)
	go func() { quit <- f.gate.Quit(context.Background(), "s", "q") }()
	<-held.entered // Quit has read the inbound stream: before is fixed

	f.hooks.action = hooks.AdmitSteer
	n := f.stored(t, "n", "s") // after the quit
	if err := f.gate.Process(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	select {
	case <-next.taking:
	case <-time.After(5 * time.Second):
		t.Fatal("a did not drain n")
	}
	close(held.release)
	if err := <-quit; err != nil {
		t.Fatalf("Quit: %v", err)
	}
	wait(t, a)
	f.turns.release("q")
	wait(t, q)

	left, err := f.gate.steer.Count(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(t.Context(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), f.names.Inbound("http"))
	if err != nil {
		t.Fatal(err)
	}
	reinjected := raw.Header.Get(subjects.HeaderAdmission) == string(followUp)
	if started, _ := f.turns.snapshot(); !slices.Contains(started, "n") && left == 0 && !reinjected {
		t.Fatalf("n, stored after the quit, was taken by turn a (took %v), which the quit then stopped, and removed: not run, not in the steering stream, not re-injected (started %v)", next.took, started)
	}
}
