package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// twoRegistries returns two registries over separate connections, as two
// workers have.
func twoRegistries(t *testing.T) (a, b *Registry) {
	t.Helper()
	srv := natstest.Start(t)
	names := subjects.Default()
	var regs []*Registry
	for range 2 {
		_, js := srv.JetStream(t)
		if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{MemoryStorage: true, TurnTTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		r, err := NewRegistry(t.Context(), js, names, RegistryOptions{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		regs = append(regs, r)
	}
	return regs[0], regs[1]
}

func runKeys(t *testing.T, r *Registry, session string) []string {
	t.Helper()
	k, _, err := r.keys(t.Context(), session)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(func(yield func(string) bool) {
		for key := range k.run {
			if !yield(key) {
				return
			}
		}
	})
}

// The mirror answers as of the call: a key another worker wrote (or
// removed) a moment ago is in (or out of) the very next snapshot, with no
// waiting in between.
func TestMirrorSnapshotSeesAnotherWorkersWriteAtOnce(t *testing.T) {
	a, b := twoRegistries(t)
	for i := range 50 {
		key := a.names.TurnRunKey("s", fmt.Sprint("e", i))
		l, err := a.hold(t.Context(), key, entry{Envelope: "e"})
		if err != nil {
			t.Fatal(err)
		}
		if got := runKeys(t, b, "s"); !slices.Equal(got, []string{key}) {
			t.Fatalf("round %d: other worker's snapshot %v right after the write, want [%s]", i, got, key)
		}
		l.end(t.Context())
		if got := runKeys(t, b, "s"); len(got) != 0 {
			t.Fatalf("round %d: other worker's snapshot %v right after the removal, want none", i, got)
		}
	}
	if got := runKeys(t, b, "other"); len(got) != 0 {
		t.Fatalf("unrelated session shows keys %v", got)
	}
}

// Done markers are not mirrored, and a session whose keys are gone leaves
// nothing behind in the mirror.
func TestMirrorKeepsOnlyLiveSessions(t *testing.T) {
	a, b := twoRegistries(t)
	if err := a.MarkDone(t.Context(), "env1", nil); err != nil {
		t.Fatal(err)
	}
	l, err := a.hold(t.Context(), a.names.TurnWaitKey("s", 7), entry{Envelope: "e", Seq: 7})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := b.keys(t.Context(), "s")
	if err != nil || len(k.wait) != 1 {
		t.Fatalf("wait keys %v %v, want one", k.wait, err)
	}
	l.end(t.Context())
	if _, _, err := b.keys(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	b.live.mu.Lock()
	defer b.live.mu.Unlock()
	if len(b.live.sessions) != 0 || len(b.live.versions) != 0 {
		t.Fatalf("mirror keeps %v / %v after every key went", b.live.sessions, b.live.versions)
	}
}

// With its watch gone, the registry still answers exactly, from a listing
// of its own.
func TestKeysFallBackWhenTheMirrorStopped(t *testing.T) {
	a, b := twoRegistries(t)
	b.live.stop()
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		b.live.mu.Lock()
		defer b.live.mu.Unlock()
		return b.live.ended != nil, "the mirror's watch has not ended"
	})
	key := a.names.TurnRunKey("s", "e1")
	if _, err := a.hold(t.Context(), key, entry{Envelope: "e1"}); err != nil {
		t.Fatal(err)
	}
	if got := runKeys(t, b, "s"); !slices.Equal(got, []string{key}) {
		t.Fatalf("snapshot without the mirror %v, want [%s]", got, key)
	}
}

// With its watch gone, a wait for the session's next change (a follow-up
// waiting for its turn, Quit) waits for its recheck instead of returning
// at once: it used to list the keys again and again, a consumer each.
func TestWaitWithoutTheMirrorWaitsForTheRecheck(t *testing.T) {
	a, b := twoRegistries(t)
	if _, err := a.hold(t.Context(), a.names.TurnRunKey("s", "e1"), entry{Envelope: "e1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.keys(t.Context(), "s"); err != nil { // the mirror has seen s
		t.Fatal(err)
	}
	b.live.stop()
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		b.live.mu.Lock()
		defer b.live.mu.Unlock()
		return b.live.ended != nil, "the mirror's watch has not ended"
	})
	_, version, err := b.keys(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := b.awaitChange(ctx, "s", version, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("awaitChange without the mirror returned %v after %v, want it to wait (here until its deadline)", err, time.Since(start))
	}
}

// A lease that stopped is never written again by the heartbeat loop, so
// a removed key stays removed.
func TestStoppedLeaseIsNotRevived(t *testing.T) {
	a, b := twoRegistries(t)
	key := a.names.TurnRunKey("s", "e1")
	l, err := a.hold(t.Context(), key, entry{Envelope: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	l.end(t.Context())
	deadline := time.Now().Add(time.Second) // three heartbeat periods
	for time.Now().Before(deadline) {
		if got := runKeys(t, b, "s"); len(got) != 0 {
			t.Fatalf("ended key came back: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A turn of a session nobody steers reads the steering stream once: the
// end-of-turn check that no steering message was left behind. Its
// snapshot and its drains answer from the registry mirror.
func TestUnsteeredTurnReadsTheSteeringStreamOnce(t *testing.T) {
	f := newFixture(t, "")
	f.turns.drain = true
	if _, err := f.gate.steer.steerStream(t.Context()); err != nil { // bound once per worker
		t.Fatal(err)
	}
	reads, stop := countRequests(t, f.js.Conn(), f.names.SteerStream())
	done := f.process(inbound("a", "quiet"))
	f.waitStarted(t, "a")
	f.turns.release("a")
	wait(t, done)
	stop()
	if n := reads.Load(); n != 1 {
		t.Fatalf("the turn made %d requests to the steering stream, want 1", n)
	}
}

// One heartbeat round keeps many keys alive: 300 leases with a 1 s TTL
// are all still registered after three TTLs.
func TestHeartbeatKeepsManyKeys(t *testing.T) {
	a, b := twoRegistries(t)
	const n = 300
	for i := range n {
		if _, err := a.hold(t.Context(), a.names.TurnRunKey("many", fmt.Sprint("e", i)), entry{Envelope: "e"}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // three TTLs: only heartbeats keep the keys
	if got := runKeys(t, b, "many"); len(got) != n {
		t.Fatalf("%d of %d keys alive after three TTLs", len(got), n)
	}
}

// countRequests counts the JetStream API requests on nc whose subject
// contains any of parts until the returned stop.
func countRequests(t *testing.T, nc *nats.Conn, parts ...string) (*atomic.Int64, func()) {
	t.Helper()
	var n atomic.Int64
	sub, err := nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		for _, p := range parts {
			if strings.Contains(m.Subject, p) {
				n.Add(1)
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n, func() {
		if err := nc.Flush(); err != nil {
			t.Error(err)
		}
		// Drain, not Unsubscribe: the requests flushed above may still be
		// queued for the callback, and Unsubscribe would drop them.
		if err := sub.Drain(); err != nil {
			t.Error(err)
		}
		natstest.Eventually(t, 5*time.Second, func() (bool, string) { return !sub.IsValid(), "the request counter still drains" })
	}
}

// On a worker where nothing implements admit_message (the default
// policy) a turn reads neither the registry nor the steering stream: it
// takes no snapshot and its end-of-turn steering check answers from the
// mirror. It still registers its run key while it runs, for quit and for
// other workers' follow-ups.
func TestTurnWithoutAdmitterReadsNoRegistryAndNoSteering(t *testing.T) {
	f := newFixture(t, "")
	f.hooks.none = true
	if _, err := f.gate.steer.steerStream(t.Context()); err != nil { // bound once per worker
		t.Fatal(err)
	}
	reads, stop := countRequests(t, f.js.Conn(), f.names.SteerStream(), f.names.KVStream(f.names.TurnsBucket()))
	done := f.process(inbound("a", "quiet"))
	f.waitStarted(t, "a")
	stop()
	if n := reads.Load(); n != 0 {
		t.Fatalf("the turn made %d requests to the turn registry or the steering stream, want 0", n)
	}
	if snap, err := f.gate.Snapshot(t.Context(), "quiet", "", 0); err != nil || snap.RunningCount != 1 {
		t.Fatalf("snapshot of the running turn %+v %v, want its run key", snap, err)
	}
	reads, stop = countRequests(t, f.js.Conn(), f.names.SteerStream(), f.names.KVStream(f.names.TurnsBucket()))
	f.turns.release("a")
	wait(t, done)
	stop()
	if n := reads.Load(); n != 0 {
		t.Fatalf("the turn's end made %d requests to the turn registry or the steering stream, want 0", n)
	}
	if len(f.hooks.snaps) != 0 {
		t.Fatalf("admit_message was called %d times", len(f.hooks.snaps))
	}
	if ok, err := f.gate.reg.Done(t.Context(), "a"); err != nil || !ok {
		t.Fatalf("no done marker (%v): a redelivery would run the turn again", err)
	}
}

// A steering message another worker queued for a turn running on a
// worker without admit_message is not lost: that turn's end finds it in
// the mirror and makes it a follow-up.
func TestSteerFromAnotherWorkerIsSweptByATurnWithoutAdmitter(t *testing.T) {
	f := newFixture(t, "")
	f.hooks.none = true
	steerer := &testHooks{action: hooks.AdmitSteer}
	gateB, err := NewGate(t.Context(), Options{JS: f.js, Names: f.names, Source: events.Source("worker", "b"), Hooks: steerer, Outbox: f.out, Next: newTurns(), TTL: time.Second, Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gateB.Close)
	a := f.process(inbound("a", "s")) // never drains
	f.waitStarted(t, "a")
	if err := gateB.Process(t.Context(), inbound("b", "s")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.gate.steer.Count(t.Context(), "s"); err != nil || n != 1 {
		t.Fatalf("worker B steered %d messages (%v), want 1", n, err)
	}
	f.turns.release("a")
	wait(t, a)
	if n, err := f.gate.steer.Count(t.Context(), "s"); err != nil || n != 0 {
		t.Fatalf("%d steering messages left after the turn (%v): not swept", n, err)
	}
	st, err := f.js.Stream(t.Context(), f.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), f.names.Inbound("http"))
	if err != nil || raw.Header.Get(subjects.HeaderMsgID) != "b/follow_up" {
		t.Fatalf("steering message not re-injected as a follow-up: %v", err)
	}
}

// The registry's writes ride out a bucket that does not answer for a
// while (as while a cluster elects the bucket's leader, longer than
// nats.go's own retries of "no responders"): registering a turn and its
// done marker are retried, so the turn is not handed back (before, five
// quick hand-backs during one election dead-lettered it).
func TestRegistryWritesRideOutAnUnansweredBucket(t *testing.T) {
	srv := natstest.Start(t)
	names := subjects.Default()
	_, js := srv.JetStream(t)
	topo := natsx.Topology{MemoryStorage: true, TurnTTL: time.Second}
	if err := natsx.EnsureTopology(t.Context(), js, names, topo); err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry(t.Context(), js, names, RegistryOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	gone := func() {
		t.Helper()
		if err := js.DeleteStream(t.Context(), "KV_"+names.TurnsBucket()); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { _ = natsx.EnsureTopology(t.Context(), js, names, topo) })
	}
	gone()
	key := names.TurnRunKey("s", "e1")
	l, err := r.hold(t.Context(), key, entry{Envelope: "e1"})
	if err != nil {
		t.Fatalf("hold = %v, want the registration retried until the bucket answers", err)
	}
	l.stop()
	gone()
	if err := r.MarkDone(t.Context(), "e1", nil); err != nil {
		t.Fatalf("MarkDone = %v, want it retried until the bucket answers", err)
	}
	if _, err := r.kv.Get(t.Context(), names.DoneKey("e1")); err != nil {
		t.Fatalf("done marker: %v", err)
	}
}
