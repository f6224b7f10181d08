package worker

// The worker loop on rare paths: a busy worker and the ack wait, a turn
// that finishes as the shutdown grace runs out, an approved turn and its
// session's follow-up, a consumer deleted under a running worker. Each
// test failed before its fix; the comment above it says what went wrong
// and what is expected.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// procFunc is a Processor made of a function.
type procFunc func(ctx context.Context, in Inbound) error

func (p procFunc) Process(ctx context.Context, in Inbound) error { return p(ctx, in) }

// rig is one NATS server with the Bub topology and a worker running
// proc on it.
type rig struct {
	srv   *natstest.Server
	js    jetstream.JetStream
	names subjects.Names
	logs  syncBuffer // the worker's log
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
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

func newRig(t *testing.T, topo natsx.Topology) *rig {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	names := subjects.Default()
	topo.MemoryStorage = true
	if _, err := natsx.Apply(t.Context(), js, names, topo, natsx.Provision, nil); err != nil {
		t.Fatal(err)
	}
	return &rig{srv: srv, js: js, names: names}
}

// run starts a worker with cfg and proc; the returned function cancels its
// context and waits (bounded) for Run to return.
func (r *rig) run(t *testing.T, cfg Config, proc Processor) (stop func() error) {
	t.Helper()
	_, js := r.srv.JetStream(t)
	w, err := New(cfg, js, r.names, proc, slog.New(slog.NewTextHandler(&r.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("Run did not return within 30s of its context's end")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// publish stores an inbound envelope with content as ingress does.
func (r *rig) publish(t *testing.T, session, content string) *envelope.Envelope {
	t.Helper()
	env := &envelope.Envelope{ID: events.NewID(), SessionID: session, Channel: "cli", ChatID: "c", Content: content}
	storeInbound(t, r.js, r.names, env)
	return env
}

func (r *rig) consumer(t *testing.T) jetstream.Consumer {
	t.Helper()
	c, err := r.js.Consumer(t.Context(), r.names.InboundStream(), r.names.WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Before the fix: a message the worker has pulled but that waits for a turn slot is
// never kept alive, so it is redelivered elsewhere while the worker holds
// it, and the worker later runs its stale first delivery anyway.
//
// Worker.Run (worker.go:158-175) takes a message from the pull iterator
// (which, with PullMaxMessages(Concurrency), buffers up to Concurrency more)
// and then blocks on `sem <- struct{}{}` until a running turn ends. Only
// handle starts keepAlive (worker.go:220), so neither the message the loop
// holds nor the ones buffered behind it get in-progress acks. Interleaving
// (Concurrency 1, ack wait 1s): turn A runs for 3s; B is pulled and waits
// for A's slot; after 1s the server redelivers B (delivery 2) to another
// worker's pull (here: the test's Fetch), which runs and acknowledges it;
// A ends, and this worker runs B's delivery 1. Delivery 1 skips the done
// marker check (the admission gate reads it only on a redelivery), so the
// turn runs a second time: model calls and tools again, a second reply
// once the dedupe window passed. With agent turns routinely longer than
// the 30s default ack wait, any worker at full capacity does this.
//
// Expected: a worker pulls a message only once a slot is free for it, so
// a busy worker leaves it to the others.
func TestBusyWorkerTakesNoMessageItCannotStart(t *testing.T) {
	r := newRig(t, natsx.Topology{WorkerAckWait: time.Second})
	aStarted, releaseA := make(chan struct{}), make(chan struct{})
	var (
		mu    sync.Mutex
		calls = map[string][]uint64{} // content -> deliveries run
	)
	r.run(t, Config{Concurrency: 1, ShutdownGrace: time.Second}, procFunc(func(ctx context.Context, in Inbound) error {
		mu.Lock()
		calls[in.Envelope.Content] = append(calls[in.Envelope.Content], in.Delivery)
		mu.Unlock()
		if in.Envelope.Content == "A" {
			close(aStarted)
			select {
			case <-releaseA:
			case <-ctx.Done():
			}
		}
		return nil
	}))
	r.publish(t, "s:a", "A")
	select {
	case <-aStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("turn A never started")
	}
	time.Sleep(300 * time.Millisecond) // the worker's next pull is out
	r.publish(t, "s:b", "B")
	time.Sleep(300 * time.Millisecond) // B reached the worker, which holds it

	// Another worker pulls from the shared consumer meanwhile: it gets B,
	// which the busy worker did not take.
	batch, err := r.consumer(t).Fetch(1, jetstream.FetchMaxWait(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var other jetstream.Msg
	for m := range batch.Messages() {
		other = m
	}
	if other == nil {
		t.Fatal("the other worker got nothing: the busy worker holds B")
	}
	md, err := other.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if md.NumDelivered != 1 {
		t.Fatalf("the other worker got B's delivery %d: the busy worker held B past the ack wait", md.NumDelivered)
	}
	if err := other.DoubleAck(t.Context()); err != nil { // the other worker ran it
		t.Fatal(err)
	}
	close(releaseA)
	time.Sleep(1500 * time.Millisecond) // the busy worker runs what it held, if anything
	mu.Lock()
	bRuns := append([]uint64(nil), calls["B"]...)
	mu.Unlock()
	if len(bRuns) != 0 {
		t.Fatalf("the busy worker also ran B's deliveries %v: the turn ran twice", bRuns)
	}
}

// Before the fix: after ShutdownGrace, a turn that finished is not acknowledged.
//
// When the grace period ends, Run cancels turnCtx (worker.go:189). handle
// then acknowledges a turn whose Process returned nil with
// doubleAck(ctx, msg) on that cancelled ctx (worker.go:225): jsretry.Read
// hands msg.DoubleAck an already-cancelled context, so the ack is never
// sent (only "worker.ack_failed" is logged), while the hand-back path
// (NakWithDelay, worker.go:237) needs no context and works. Process
// returning nil after the cancel is what the runtime does when its last
// publishes were acknowledged just before (turn.flush with nothing pending
// ignores ctx), and the admission gate writes the done marker with
// context.WithoutCancel, so the turn is finished and marked done, yet its
// message stays un-acknowledged: it is redelivered after the ack wait and,
// when that was its last delivery, the max-deliveries watcher dead-letters
// a finished turn (a replay of it would run it twice).
//
// Expected: a finished turn is acknowledged whatever its context, e.g. ack
// with context.WithoutCancel(ctx) and a bound of its own.
func TestTurnFinishedAtGraceExpiryIsAcknowledged(t *testing.T) {
	r := newRig(t, natsx.Topology{WorkerAckWait: 30 * time.Second})
	started := make(chan struct{})
	stop := r.run(t, Config{Concurrency: 1, ShutdownGrace: 200 * time.Millisecond}, procFunc(func(ctx context.Context, in Inbound) error {
		close(started)
		<-ctx.Done() // the grace period ended as the turn's last publish was acknowledged
		return nil   // finished: reply, events and done marker are stored
	}))
	r.publish(t, "s:grace", "hello")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn never started")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	info, err := r.consumer(t).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		var ackFailed string
		for _, line := range strings.Split(r.logs.String(), "\n") {
			if strings.Contains(line, "worker.ack_failed") {
				ackFailed = line
			}
		}
		t.Fatalf("after Run returned, ack pending %d, ack floor %d: the finished turn (Process returned nil) was not acknowledged, "+
			"because doubleAck ran on the turn context that the expired ShutdownGrace had cancelled (log: %s)", info.NumAckPending, info.AckFloor.Stream, ackFailed)
	}
}

// blockingApprover answers every approval once answer is closed.
type blockingApprover struct {
	waiting chan struct{} // closed when Wait is first called
	once    sync.Once
	answer  chan struct{}
}

func (a *blockingApprover) Request(_ context.Context, ap agent.Approval) (agent.Approval, bool, error) {
	return ap, true, nil
}

func (a *blockingApprover) Wait(ctx context.Context, id string) (agent.Approval, error) {
	a.once.Do(func() { close(a.waiting) })
	select {
	case <-a.answer:
		return agent.Approval{ID: id, Status: agent.ApprovalApproved}, nil
	case <-ctx.Done():
		return agent.Approval{}, ctx.Err()
	}
}

// Before the fix: a turn parked on an approval cannot take its slot back while the
// slots are held by turns that wait for it: a deadlock until shutdown.
//
// parking.Wait gives the turn's slot back (slot.park, slot.go:39-50) and,
// once answered, slot.resume blocks on `s.sem <- struct{}{}` until some slot
// is free (slot.go:63-71). The freed slot goes to the next message
// (worker.go:170-171). With BUB_ADMISSION=follow_up, a message of the same
// session arriving meanwhile is admitted as a follow-up: the gate's
// followUp waits (reg.awaitTurn) inside Process, holding that slot, until
// the parked turn's run key goes. Interleaving (Concurrency 1): turn T
// asks for an approval and parks; follow-up F takes the slot and waits for
// T; the approval is answered and T waits for a slot F holds, F waits for
// T: neither moves until the worker shuts down (and with Concurrency N,
// N follow-ups of sessions with pending approvals do the same). The
// processor below stands in for the gate: F returns once T has ended, as
// the gate's follow-up does.
//
// Expected: an answered approval resumes its turn (e.g. a resuming turn
// may exceed Concurrency, or a follow-up waiting for its session parks its
// slot as an approval wait does).
func TestApprovedTurnResumesWhileItsFollowUpHoldsTheSlot(t *testing.T) {
	r := newRig(t, natsx.Topology{WorkerAckWait: 30 * time.Second})
	ap := &blockingApprover{waiting: make(chan struct{}), answer: make(chan struct{})}
	approvals := parking{ap}
	tDone, fStarted := make(chan struct{}), make(chan struct{})
	r.run(t, Config{Concurrency: 1, ShutdownGrace: 500 * time.Millisecond}, procFunc(func(ctx context.Context, in Inbound) error {
		switch in.Envelope.Content {
		case "needs approval":
			_, err := approvals.Wait(ctx, "approval-1") // a before_tool_call asked a person
			if err == nil {
				close(tDone)
			}
			return err
		default: // the follow-up: waits for the session's running turn to end
			close(fStarted)
			select {
			case <-tDone:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}))
	r.publish(t, "s:approval", "needs approval")
	select {
	case <-ap.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn never asked for its approval")
	}
	r.publish(t, "s:approval", "a follow-up")
	select {
	case <-fStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow-up never started (the parked turn kept its slot)")
	}
	close(ap.answer) // the person approves
	select {
	case <-tDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the approved turn did not resume within 5s: slot.resume waits for the only slot, held by the follow-up that waits for this turn (deadlock until shutdown)")
	}
}

// Before the fix: when the pull iterator ends on its own (the shared consumer was
// deleted, e.g. re-provisioned), Run stops consuming and returns nil while
// its context is still live: the worker exits as if shut down on purpose.
//
// Worker.Run (worker.go:157-165) logs any Next error other than
// ErrMsgIteratorClosed and continues; the iterator, stopped by the
// server's "consumer deleted" status, answers the next call with
// ErrMsgIteratorClosed, which Run takes for its own drain (worker.go:160)
// and breaks: it waits for the running turns and returns nil
// (worker.go:192), though ctx never ended and nothing will consume on this
// worker again (workercmd.Run then closes the runtime and reports
// success, so a supervisor restarting failed workers does not restart it).
// The goroutine waiting for ctx to drain the iterator stays behind.
//
// Expected: Run returns only after ctx ends, or returns an error saying
// consuming stopped (or binds the consumer again).
func TestRunFailsWhenTheConsumerGoesAway(t *testing.T) {
	r := newRig(t, natsx.Topology{WorkerAckWait: 30 * time.Second})
	_, js := r.srv.JetStream(t)
	w, err := New(Config{Concurrency: 1, ShutdownGrace: 200 * time.Millisecond}, js, r.names, procFunc(func(context.Context, Inbound) error { return nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, c := w.Load()
		return c == 1, "the worker is not consuming yet"
	})
	time.Sleep(300 * time.Millisecond) // its pull request is parked on the consumer
	if err := r.js.DeleteConsumer(t.Context(), r.names.InboundStream(), r.names.WorkerConsumer()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil && ctx.Err() == nil {
			t.Fatal("Run returned nil while its context was live: the worker stopped consuming (its consumer was deleted) and reported a clean shutdown")
		}
	case <-time.After(3 * time.Second):
		// still running (or it returned an error): what is expected
	}
}
