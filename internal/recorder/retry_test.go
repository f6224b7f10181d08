package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
)

// failingStore fails every Append that carries an entry fails picks
// while blocked is set (a transient tape failure: a leader election, a
// timeout).
type failingStore struct {
	*tape.JetStreamStore
	fails    func(tape.Entry) bool
	blocked  atomic.Bool
	attempts atomic.Int32
}

func (s *failingStore) Append(ctx context.Context, name string, entries []tape.Entry, opts ...tape.AppendOption) ([]tape.Entry, error) {
	if s.blocked.Load() {
		for _, e := range entries {
			if s.fails(e) {
				s.attempts.Add(1)
				return nil, errors.New("injected transient tape failure")
			}
		}
	}
	return s.JetStreamStore.Append(ctx, name, entries, opts...)
}

// eventsWatermark reads session's committed events watermark.
func (f *fixture) eventsWatermark(t *testing.T, session string) uint64 {
	t.Helper()
	ix, err := f.store.Index(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	return ix.Watermark(taperec.WatermarkEvents)
}

// TestFailedCommitHoldsTheWatermarkUntilRetried: run y of a session is
// complete, but its commit fails (a transient tape failure) until the
// store recovers. Run z, which finished after it, is committed meanwhile:
// the events watermark stays below y's end, so a turn that waits for the
// session's newest run end cannot read a tape without y. Once the store
// recovers, y is committed again by the recorder (its events held, not
// handed back) and the watermark passes both runs.
func TestFailedCommitHoldsTheWatermarkUntilRetried(t *testing.T) {
	f := setup(t)
	y, z := newRun("rt1", "env-y", 1, "first", "one"), newRun("rt1", "env-z", 2, "second", "two")
	st := &failingStore{JetStreamStore: f.store, fails: func(e tape.Entry) bool { return e.Meta["run_id"] == y.id }}
	st.blocked.Store(true)
	f.startRecorderOn(t, recorder.Config{}, st)
	f.publish(t, y, []int{0, 1, 2, 3, 4}, map[int]string{}, false) // stream 1–5: y ends at 5
	f.publish(t, z, []int{0, 1, 2, 3, 4}, map[int]string{}, false) // stream 6–10
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		entries, err := f.store.Fetch(context.Background(), "rt1", tape.All())
		return err == nil && kinds(entries) == oneRun && st.attempts.Load() > 1,
			fmt.Sprintf("tape %s (%v), %d attempts at y; want z committed and y tried again", kinds(entries), err, st.attempts.Load())
	})
	if w := f.eventsWatermark(t, "rt1"); w >= 5 {
		t.Fatalf("events watermark %d passed y's end (5) while y is not on the tape", w)
	}
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 5 && info.NumRedelivered == 0,
			fmt.Sprintf("ack pending %d, redelivered %d; want y's 5 events held, none handed back", info.NumAckPending, info.NumRedelivered)
	})
	st.blocked.Store(false)
	if got := kinds(f.settledAt(t, "rt1", 10)); got != oneRun+" "+oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun+" "+oneRun)
	}
}

// TestCommittedRunSeenAgainDoesNotHoldItsOwnCopy: run x was committed by
// an earlier recorder; after a restart its run.finished is stored again
// (published again outside the dedupe window). The new recorder does not
// remember x: the copy is held as a run of its own until IdleRun, then
// found on the tape and acknowledged as a late copy. The watermark passes
// the copy, the session's newest run end, which the next turn waits for
// (x's own end does not hold it back).
func TestCommittedRunSeenAgainDoesNotHoldItsOwnCopy(t *testing.T) {
	f := setup(t)
	x, ids := f.recordedByAnEarlierRecorder(t, "rt2")
	again := f.publishOne(t, x, 4, ids, false)
	f.startRecorder(t, recorder.Config{IdleRun: 300 * time.Millisecond, Sweep: 20 * time.Millisecond})
	if got := kinds(f.settledAt(t, "rt2", again)); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}

// TestEventOfNoRunStoredTwiceMovesTheWatermark: an event of no run (the
// CLI's `bub tape handoff`) is stored twice (published again outside the
// dedupe window). The copy's commit is the first one's (its event id):
// the tape keeps one entry, and the watermark still passes the copy,
// which the CLI waits for.
func TestEventOfNoRunStoredTwiceMovesTheWatermark(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := &runEvents{session: "rt3"}
	r.list = []events.Event{&events.TapeEventRecorded{Meta: events.Meta{SessionID: "rt3"}, Name: "note", Data: map[string]any{"x": 1.0}}}
	ids := map[int]string{}
	f.publishOne(t, r, 0, ids, false)
	again := f.publishOne(t, r, 0, ids, false)
	if got := kinds(f.settledAt(t, "rt3", again)); got != "event:note" {
		t.Fatalf("tape = %s\nwant  event:note", got)
	}
}

// TestCommittedRunDeliveredAgainMovesTheWatermark: a run committed by a
// recorder that then lost its acknowledgements (it crashed) comes again,
// whole, to the next recorder (here: stored again). Its commit is on the
// tape already: nothing is recorded twice, and the watermark passes the
// copies, the session's newest run end.
func TestCommittedRunDeliveredAgainMovesTheWatermark(t *testing.T) {
	f := setup(t)
	x, ids := f.recordedByAnEarlierRecorder(t, "rt4")
	f.publish(t, x, []int{0, 1, 2, 3, 4}, ids, true) // the same events, stored again (stream 6–10)
	f.startRecorder(t, recorder.Config{})
	if got := kinds(f.settledAt(t, "rt4", 10)); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}

// recordedByAnEarlierRecorder has a recorder, stopped before it returns,
// commit one run of session, and returns the run and its event ids.
func (f *fixture) recordedByAnEarlierRecorder(t *testing.T, session string) (*runEvents, map[int]string) {
	t.Helper()
	stop := f.startRecorder(t, recorder.Config{})
	x := newRun(session, "env-"+session, 1, "hi", "hello")
	ids := map[int]string{}
	f.publish(t, x, []int{0, 1, 2, 3, 4}, ids, false)
	f.settled(t, session)
	stop()
	return x, ids
}
