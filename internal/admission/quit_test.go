package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
)

// stored stores a message of session in the inbound stream, as ingress
// does, and returns its first delivery: quit stops what the stream holds
// before it.
func (f *fixture) stored(t *testing.T, id, session string) worker.Inbound {
	t.Helper()
	ack, err := f.js.Publish(t.Context(), f.names.Inbound("http"), []byte(id))
	if err != nil {
		t.Fatal(err)
	}
	in := inbound(id, session)
	in.StreamSeq = ack.Sequence
	return in
}

// processOn runs g.Process in a goroutine and returns its result channel.
func processOn(g *Gate, in worker.Inbound) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.Process(context.Background(), in) }()
	return done
}

// Bub's quit(session): clear the session's pending follow-ups, cancel and
// await every running turn of the session but the calling one, on every
// worker; other sessions are untouched. Two gates on one NATS server are
// two workers.
func TestQuitStopsTheSessionsOtherTurnsOnEveryWorker(t *testing.T) {
	f := newFixture(t, "")
	turnsB := newTurns()
	gateB, err := NewGate(t.Context(), Options{JS: f.js, Names: f.names, Source: events.Source("worker", "b"), Hooks: f.hooks, Outbox: f.out, Next: turnsB, TTL: time.Second, Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gateB.Close)

	a := f.process(f.stored(t, "a", "s")) // worker A: a turn of s
	f.waitStarted(t, "a")
	x := f.process(f.stored(t, "x", "other")) // worker A: another session
	f.waitStarted(t, "a", "x")
	q := f.process(f.stored(t, "q", "s")) // worker A: the turn that quits
	f.waitStarted(t, "a", "x", "q")
	b := processOn(gateB, f.stored(t, "b", "s")) // worker B: a turn of s
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		started, _ := turnsB.snapshot()
		return slices.Equal(started, []string{"b"}), fmt.Sprintf("worker B started %v", started)
	})
	pending := f.stored(t, "c", "s")
	pending.Admission = string(followUp) // worker B: a follow-up waiting for s
	c := processOn(gateB, pending)
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
		return err == nil && snap.PendingCount == 1 && snap.RunningCount == 3, fmt.Sprintf("%+v %v", snap, err)
	})

	// The quit tool's context has no deadline.
	if err := f.gate.Quit(context.Background(), "s", "q"); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	// Quit returned: the other turns of s ended (acknowledged, done) and
	// the follow-up was cleared without running.
	for id, done := range map[string]<-chan error{"a": a, "b": b, "c": c} {
		if ok, err := f.gate.reg.Done(t.Context(), id); err != nil || !ok {
			t.Errorf("%s has no done marker (%v) when Quit returned: it would run again", id, err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s ended with %v, want acknowledged", id, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s was not handed back for acknowledgement", id)
		}
	}
	if started, _ := turnsB.snapshot(); !slices.Equal(started, []string{"b"}) {
		t.Errorf("worker B started %v: the cleared follow-up ran", started)
	}
	snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
	if err != nil || snap.RunningCount != 1 || snap.PendingCount != 0 {
		t.Errorf("after quit: %+v %v, want only the calling turn", snap, err)
	}
	// The calling turn and the other session run on.
	for _, done := range []<-chan error{q, x} {
		select {
		case err := <-done:
			t.Fatalf("a turn quit should not stop ended: %v", err)
		default:
		}
	}
	f.turns.release("q")
	f.turns.release("x")
	wait(t, q)
	wait(t, x)
	if _, finished := f.turns.snapshot(); !slices.Contains(finished, "q") || !slices.Contains(finished, "x") || slices.Contains(finished, "a") {
		t.Errorf("finished %v, want q and x to finish and a not", finished)
	}
	st, err := f.js.Stream(t.Context(), f.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), f.names.Event("s", events.SubjectName(events.TypeTurnDropped)))
	if err != nil {
		t.Fatalf("no turn.dropped event for the cleared follow-up: %v", err)
	}
	ev, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	var d events.TurnDroppedData
	if err := events.DecodeData(ev, &d); err != nil || d.EnvelopeID != "c" || d.Reason != "quit" {
		t.Fatalf("turn.dropped %+v %v, want c dropped by quit", d, err)
	}
}

// TestQuitGivesUpAfterTheRegistryTTL: a turn of the session does not stop
// (its worker is busy in a tool that ignores cancellation, or cut off
// while it still heartbeats), so its run key stays live. Quit waits for
// it at most the registry TTL and then fails naming what did not stop;
// it used to spin on the CPU without end once its deadline passed.
func TestQuitGivesUpAfterTheRegistryTTL(t *testing.T) {
	f := newFixture(t, "")
	l, err := f.gate.reg.hold(t.Context(), f.names.TurnRunKey("s", "stuck"), entry{Envelope: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.end(context.Background())
	quit := make(chan error, 1)
	go func() { quit <- f.gate.Quit(context.Background(), "s", "q") }()
	select {
	case err := <-quit:
		if err == nil || !strings.Contains(err.Error(), "1 turns and 0 follow-ups of s did not stop") {
			t.Fatalf("Quit = %v, want it to name the turn that did not stop", err)
		}
	case <-time.After(5 * time.Second): // five times the TTL
		t.Fatal("Quit did not return within five times the registry TTL")
	}
}

// droppedBy returns the reason of envelope's turn.dropped event in
// session ("" when there is none).
func (f *fixture) droppedBy(t *testing.T, session, envelope string) string {
	t.Helper()
	c, err := f.js.OrderedConsumer(t.Context(), f.names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.names.Event(session, events.SubjectName(events.TypeTurnDropped))}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		ev, err := events.Decode(msg.Headers(), msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		var d events.TurnDroppedData
		if err := events.DecodeData(ev, &d); err != nil {
			t.Fatal(err)
		}
		if d.EnvelopeID == envelope {
			return d.Reason
		}
	}
	return ""
}

// A turn and a follow-up handed back by a stopping worker are running
// nowhere when ,quit comes; their messages are redelivered after it. They
// came before the quit, so they never run: each is dropped with reason
// "quit", once. A message that came before the quit but is delivered only
// after it is dropped too, and one that came after it runs (here while
// Quit still waits, and Quit does not wait for it).
func TestQuitStopsWhatCameBeforeItWhereverItWaits(t *testing.T) {
	f := newFixture(t, hooks.AdmitFollowUp)
	f.turns.handBack = map[string]bool{"a": true}
	a := f.stored(t, "a", "s")
	first := f.process(a)
	f.waitStarted(t, "a")
	stopping := make(chan struct{})
	b := f.stored(t, "b", "s") // a follow-up of a
	b.Stopping = stopping
	waiting := f.process(b)
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		snap, err := f.gate.Snapshot(t.Context(), "s", "", 0)
		return err == nil && snap.PendingCount == 1, fmt.Sprintf("%+v %v", snap, err)
	})
	close(stopping) // the worker stops: b is handed back with its wait key
	if err := <-waiting; !errors.Is(err, worker.ErrRetry) {
		t.Fatalf("stopping follow-up b: %v, want it handed back", err)
	}
	f.turns.release("a") // a's turn is handed back with its run key
	if err := <-first; !errors.Is(err, worker.ErrRetry) {
		t.Fatalf("first delivery of a: %v, want it handed back", err)
	}
	late := f.stored(t, "late", "s") // stored before the quit, delivered after it

	f.hooks.action = hooks.AdmitProcess
	q := f.process(f.stored(t, "q", "s"))
	f.waitStarted(t, "a", "q")
	quit := make(chan error, 1)
	go func() { quit <- f.gate.Quit(context.Background(), "s", "q") }()
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		return f.gate.reg.live.quitAt("s") > 0, "no quit marker"
	})
	n := f.stored(t, "n", "s") // after the quit: runs as usual
	nDone := f.process(n)
	f.waitStarted(t, "a", "q", "n")

	a.Delivery, b.Delivery, b.Stopping = 2, 2, nil
	for _, in := range []worker.Inbound{a, b, late} {
		f.notRun(t, in, in.Envelope.ID+" ran after the quit that came after it")
		if why := f.droppedBy(t, "s", in.Envelope.ID); why != "quit" {
			t.Errorf("%s: turn.dropped reason %q, want quit", in.Envelope.ID, why)
		}
		if ok, err := f.gate.reg.Done(t.Context(), in.Envelope.ID); err != nil || !ok {
			t.Errorf("%s has no done marker (%v): a further redelivery would decide again", in.Envelope.ID, err)
		}
	}
	select {
	case err := <-quit:
		if err != nil {
			t.Fatalf("Quit: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Quit did not return once the handed-back turn and follow-up were dropped")
	}
	select {
	case err := <-nDone:
		t.Fatalf("n, which came after the quit, ended before it was released: %v", err)
	default:
	}
	f.turns.release("n")
	f.turns.release("q")
	wait(t, nDone)
	wait(t, q)
	if _, finished := f.turns.snapshot(); !slices.Equal(slices.Sorted(slices.Values(finished)), []string{"a", "n", "q"}) {
		t.Errorf("finished %v, want a (its handed-back first delivery), n and q", finished)
	}
	// The turn that quit, redelivered (its acknowledgement lost before its
	// done marker), is not stopped by its own quit.
	redelivered := f.stored(t, "q2", "s")
	if err := f.gate.reg.markQuit(t.Context(), "s", redelivered.StreamSeq+1, "q2"); err != nil {
		t.Fatal(err)
	}
	redelivered.Delivery = 2
	done := f.process(redelivered)
	f.waitStarted(t, "a", "q", "n", "q2")
	f.turns.release("q2")
	wait(t, done)
}
