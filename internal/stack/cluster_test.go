package stack_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
)

// recoveryGoal bounds the time from a stream leader's loss to the first
// answered turn sent after it (issue 18).
const recoveryGoal = 10 * time.Second

// tapesRecoveryBound is the looser bound of the loss of the tapes
// stream's leader: there a tape append cut by the lost connection is
// retried as a writer conflict until its repair.
const tapesRecoveryBound = 20 * time.Second

// recoveryGoalOn: TestRecoveryAfterLeaderLoss checks its time goals and
// that no turn read a stale tape only with BUB_RECOVERY_GOAL=1, by hand
// on a machine with cores to spare: under make test's race detector on
// two cores the timings measure the machine. Without it the test still
// checks that no turn fails and every turn is answered and recorded
// exactly once.
var recoveryGoalOn = os.Getenv("BUB_RECOVERY_GOAL") == "1"

// turnLoad sends turns on its sessions, one at a time per session (so
// every turn after a session's first waits on the recorder to commit the
// one before: read-your-writes), until stopped.
type turnLoad struct {
	c  *stacktest.Cluster
	mu sync.Mutex
	// answered is when each turn sent at sent[id] was answered.
	sent, answered map[string]time.Time
	failed         []string
	wg             sync.WaitGroup
	stop           atomic.Bool
}

func (l *turnLoad) start(t *testing.T, sessions int) {
	for s := range sessions {
		l.wg.Go(func() {
			for i := 0; !l.stop.Load(); i++ {
				id := fmt.Sprintf("s%d-t%03d", s, i)
				if err := l.turn(t, id, fmt.Sprintf("ride:s%d", s)); err != nil {
					l.mu.Lock()
					l.failed = append(l.failed, fmt.Sprintf("%s: %v", id, err))
					l.mu.Unlock()
					return
				}
			}
		})
	}
}

func (l *turnLoad) turn(t *testing.T, id, session string) error {
	env := &envelope.Envelope{ID: id, SessionID: session, Content: "turn " + id + ".", Channel: "test", ChatID: session}
	await := l.c.Gateway.Expect(id)
	l.mu.Lock()
	l.sent[id] = time.Now()
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := l.c.Gateway.Publish(ctx, env); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	outs, err := await(ctx)
	if err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	if len(outs) != 1 || outs[0].Kind == envelope.KindError {
		return fmt.Errorf("replies %+v, want one answer", outs)
	}
	l.mu.Lock()
	l.answered[id] = time.Now()
	l.mu.Unlock()
	return nil
}

// firstAnsweredAfter returns when the first turn sent at or after t0 was
// answered (zero while none was).
func (l *turnLoad) firstAnsweredAfter(t0 time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for id, at := range l.answered {
		if !l.sent[id].Before(t0) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// TestRecoveryAfterLeaderLoss: on a 3-server cluster with R3 streams,
// buckets and consumers, two workers and the recorder, turns run on six
// sessions while the server leading BUB_INBOUND, then the one leading
// BUB_EVENTS, then the one leading BUB_TAPES is shut down (and restarted
// once a turn sent after the loss was answered). No turn fails, and
// every turn is answered exactly once and is on its session's tape
// exactly once. With BUB_RECOVERY_GOAL=1 also: after the inbound and the
// events leader loss a turn sent after it is answered within
// recoveryGoal and no turn reads a stale tape (no tape.stale event);
// after the tapes leader loss within tapesRecoveryBound.
func TestRecoveryAfterLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster with three leader losses")
	}
	start := time.Now()
	c := stacktest.Start(t, stacktest.Options{Servers: 3, Workers: 2, Instance: "ride",
		Log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Script: fakellm.Script{Steps: []fakellm.Step{{Echo: true, Repeat: true, Delay: fakellm.Duration(50 * time.Millisecond)}}}})
	names := c.Conn.Names
	var stale atomic.Int64
	sub, err := c.Conn.NC.Subscribe(names.EventsOfType(events.SubjectName(events.TypeTapeStale)), func(m *nats.Msg) {
		stale.Add(1)
		t.Logf("tape.stale at %v: %s", time.Since(start).Round(10*time.Millisecond), m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	const sessions = 6
	load := &turnLoad{c: c, sent: map[string]time.Time{}, answered: map[string]time.Time{}}
	load.start(t, sessions)
	var staleBefore int64 // tape.stale events before the tapes leader loss
	// The turns already ran a while: every session has a finished turn.
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		load.mu.Lock()
		defer load.mu.Unlock()
		return len(load.answered) >= 3*sessions, fmt.Sprintf("%d turns answered", len(load.answered))
	})
	for _, stream := range []string{names.InboundStream(), names.EventsStream(), names.TapesStream()} {
		c.Servers.WaitCurrent(t, c.Conn.JS)
		if stream == names.TapesStream() {
			staleBefore = stale.Load()
		}
		leader := c.Servers.StreamLeader(t, c.Conn.JS, stream)
		i := serverIndex(c.Servers, leader)
		t0 := time.Now()
		t.Logf("%v: shutting down %s, leader of %s", time.Since(start).Round(10*time.Millisecond), leader.Name(), stream)
		leader.Shutdown()
		var first time.Time
		natstest.Eventually(t, 2*time.Minute, func() (bool, string) {
			first = load.firstAnsweredAfter(t0)
			return !first.IsZero(), fmt.Sprintf("no turn sent after %s's leader %s was shut down is answered", stream, leader.Name())
		})
		took := first.Sub(t0)
		t.Logf("%s: leader %s shut down; the first turn sent afterwards answered after %v", stream, leader.Name(), took.Round(10*time.Millisecond))
		goal := recoveryGoal
		if stream == names.TapesStream() {
			goal = tapesRecoveryBound
		}
		if recoveryGoalOn && took > goal {
			t.Errorf("%s: first new turn answered %v after the leader loss, want at most %v", stream, took.Round(10*time.Millisecond), goal)
		}
		// A few more turns on the two remaining servers, then the lost
		// one comes back.
		n := countAnswered(load)
		natstest.Eventually(t, time.Minute, func() (bool, string) {
			return countAnswered(load) >= n+sessions, "turns after the recovery"
		})
		c.Servers.Restart(t, i)
	}
	load.stop.Store(true)
	load.wg.Wait()
	if len(load.failed) > 0 {
		t.Fatalf("%d turns failed: %s", len(load.failed), strings.Join(load.failed, "; "))
	}
	if recoveryGoalOn && staleBefore != 0 {
		t.Errorf("%d tape.stale events after the inbound and events leader losses: turns read a stale tape", staleBefore)
	}
	t.Logf("tape.stale events: %d before the tapes leader loss, %d after it", staleBefore, stale.Load()-staleBefore)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := stack.WaitRecorded(ctx, c.Conn); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: the recorder took every event", time.Since(start).Round(10*time.Millisecond))
	checkExactlyOnce(t, c, load, sessions)
}

func countAnswered(l *turnLoad) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answered)
}

func serverIndex(c *natstest.Cluster, s *natstest.Server) int {
	for i, x := range c.Servers {
		if x == s {
			return i
		}
	}
	return -1
}

// checkExactlyOnce checks that the outbound stream holds one reply per
// turn of load and each session's tape its user messages once each.
func checkExactlyOnce(t *testing.T, c *stacktest.Cluster, load *turnLoad, sessions int) {
	t.Helper()
	names := c.Conn.Names
	st, err := c.Conn.JS.Stream(t.Context(), names.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	replies := map[string]int{}
	for next := uint64(1); ; {
		raw, err := st.GetMsg(t.Context(), next, jetstream.WithGetMsgSubject(names.OutboundAll()))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		next = raw.Sequence + 1
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		var env envelope.Envelope
		if err := events.DecodeData(ev, &env); err != nil {
			t.Fatal(err)
		}
		replies[env.InReplyTo]++
	}
	onTape := map[string]int{}
	for s := range sessions {
		for _, e := range c.Tape(t, fmt.Sprintf("ride:s%d", s)) {
			if e.Kind != tape.KindMessage || e.Payload["role"] != "user" {
				continue
			}
			text := fmt.Sprint(e.Payload["content"])
			if i := strings.Index(text, "turn "); i >= 0 {
				id, _, _ := strings.Cut(text[i+len("turn "):], ".")
				onTape[id]++
			}
		}
	}
	load.mu.Lock()
	defer load.mu.Unlock()
	for id := range load.answered {
		if replies[id] != 1 {
			t.Errorf("turn %s has %d replies, want 1", id, replies[id])
		}
		if onTape[id] != 1 {
			t.Errorf("turn %s is %d times on its tape, want once", id, onTape[id])
		}
	}
	t.Logf("%d turns answered, each once and once on its tape", len(load.answered))
}

// TestLameDuckMovesClients: on a 3-server cluster, while turns run, the
// server most service connections are on enters lame-duck mode. Every
// connection leaves it within 5s (before the server's 10s grace period
// ends, so they moved themselves rather than being closed), and no turn
// fails.
func TestLameDuckMovesClients(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster in lame-duck mode")
	}
	c := stacktest.Start(t, stacktest.Options{Servers: 3, Workers: 2, Instance: "ldm",
		Log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Script: fakellm.Script{Steps: []fakellm.Step{{Echo: true, Repeat: true, Delay: fakellm.Duration(50 * time.Millisecond)}}}})
	const sessions = 4
	load := &turnLoad{c: c, sent: map[string]time.Time{}, answered: map[string]time.Time{}}
	load.start(t, sessions)
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		return countAnswered(load) >= 2*sessions, "turns before the lame duck"
	})
	busiest := c.Servers.Servers[0]
	for _, s := range c.Servers.Servers {
		if s.NumClients() > busiest.NumClients() {
			busiest = s
		}
	}
	had := busiest.NumClients()
	t0 := time.Now()
	go busiest.LameDuckShutdown()
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		return busiest.NumClients() == 0, fmt.Sprintf("%d of %d clients still on %s", busiest.NumClients(), had, busiest.Name())
	})
	t.Logf("%d clients left %s within %v of its lame-duck mode", had, busiest.Name(), time.Since(t0).Round(10*time.Millisecond))
	n := countAnswered(load)
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		return countAnswered(load) >= n+2*sessions, "turns after the lame duck"
	})
	load.stop.Store(true)
	load.wg.Wait()
	if len(load.failed) > 0 {
		t.Fatalf("%d turns failed: %s", len(load.failed), strings.Join(load.failed, "; "))
	}
	t.Logf("%d turns answered, none failed", countAnswered(load))
}
