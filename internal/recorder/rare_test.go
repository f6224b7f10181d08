package recorder_test

// The events watermark on rare paths: a dead-lettered run end, a
// committed run seen again by a restarted recorder, an event of no run
// whose commit fails. Each test failed before its fix; the comment above
// it says what went wrong and what is expected.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
)

// readYourWrites is the worker's default read-your-writes bound: a
// turn waits this long for the events watermark to pass its session's
// newest run end (internal/worker, awaitEarlierTurns), plus a margin.
const readYourWrites = 6 * time.Second

// watermarkWithin waits up to d for session's events watermark to reach
// seq and fails the test with the watermark it stayed at otherwise.
func (f *fixture) watermarkWithin(t *testing.T, session string, seq uint64, d time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if _, err := f.store.WaitWatermark(ctx, session, taperec.WatermarkEvents, seq); err != nil {
		entries, _ := f.store.Fetch(context.Background(), session, tape.All())
		t.Fatalf("events watermark of %s stayed at %d, never reached %d within %v (%s); tape: %s",
			session, f.eventsWatermark(t, session), seq, d, why, kinds(entries))
	}
}

// Before the fix: a run end whose event carries a run id but no seq is
// dead-lettered (lane.reject, run.go handle), and nothing moves the
// session's events watermark past it: reject acknowledges it without a
// watermark write, and the run it ends, held without an end, is recorded
// as interrupted at IdleRun with the watermark only at its newest held
// event (run.newest), below the dead-lettered end. The worker waits for
// the newest run.finished/command.finished stored on the session's
// subjects, whatever its content (internal/worker lastRunEnd), so the
// session's next turn waits out its whole read-your-writes bound (5 s).
// Expected: once nothing of the session ends before it uncommitted (here:
// the run was recorded as interrupted), the watermark passes the
// dead-lettered run end.
func TestDeadLetteredRunEndWithoutSeqIsPassedByTheWatermark(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{IdleRun: 300 * time.Millisecond, Sweep: 20 * time.Millisecond})
	x := newRun("rv1", "env-rv1a", 1, "first", "one")
	f.publish(t, x, []int{0, 1, 2, 3, 4}, map[int]string{}, false) // stream 1–5
	f.settledAt(t, "rv1", 5)
	y := newRun("rv1", "env-rv1b", 2, "second", "two")
	f.publish(t, y, []int{0, 1, 2, 3}, map[int]string{}, false) // stream 6–9
	end := `{"specversion":"1.0","id":"end-rv1","source":"/x","type":"` + events.TypeRunFinished + `","subject":"rv1","runid":"` + y.id +
		`","datacontenttype":"application/json","data":{"status":"ok","steps":1}}` // no seq
	ack, err := f.js.Publish(t.Context(), f.names.Event("rv1", events.SubjectName(events.TypeRunFinished)), []byte(end))
	if err != nil {
		t.Fatal(err)
	}
	f.wantDeadLetter(t, dlq.ReasonInvalid, "seq")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		entries, err := f.store.Fetch(context.Background(), "rv1", tape.All())
		return err == nil && kinds(entries) == oneRun+" event:run.interrupted", fmt.Sprintf("tape %s (%v), want y recorded as interrupted", kinds(entries), err)
	})
	f.watermarkWithin(t, "rv1", ack.Sequence, readYourWrites, "the dead-lettered run.finished without seq, the session's newest run end")
}

// Before the fix: a run the tape holds already comes again to a
// recorder that does not remember it (it restarted since: the earlier
// recorder lost its acknowledgements, or the run's events were stored
// again), and the run answers a redelivered envelope (its run.started
// says delivery 2: the turn ran again after a worker crash), or its
// run.started is itself a redelivery (NumDelivered > 1). lane.supersede
// (run.go, the `late || rn.delivery > 1` branch) asks envelopeCommitted,
// which answers with rn's own id because rn itself is on the tape;
// supersede compares that only with rn.resumes (not with rn.id, as its
// l.answered branch does), takes rn as stale and interrupts it; interrupt
// finds it committed and acknowledges what is held of it (duplicates) —
// without remembering the run as done (l.done). The run's later events
// then open a new run of the same id, held without its seq 1 until IdleRun
// (10 min); its end holds the session's events watermark below it
// (lane.watermark), so every later run of the session is committed with
// the watermark capped there and every later turn waits out its
// read-your-writes bound (5 s), for 10 minutes. (The same happens, with
// run.started redelivered before the run's other events, to a run with no
// delivery in its metadata whose commit's acknowledgements were lost.)
// Expected: the copy is recognised as a replay of the committed run (its
// later events late duplicates), and the next run's commit moves the
// watermark past its own end at once.
func TestCommittedRunOfARedeliverySeenAgainDoesNotHoldTheWatermark(t *testing.T) {
	f := setup(t)
	stop := f.startRecorder(t, recorder.Config{})
	x := newRun("rv2", "env-rv2a", 1, "question", "answer")
	x.list[0].(*events.RunStarted).Metadata.Delivery = 2 // the envelope's second delivery
	ids := map[int]string{}
	f.publish(t, x, []int{0, 1, 2, 3, 4}, ids, false) // stream 1–5
	f.settledAt(t, "rv2", 5)
	stop()
	f.publish(t, x, []int{0, 1, 2, 3, 4}, ids, true) // x's events again (stream 6–10), for a restarted recorder
	f.startRecorder(t, recorder.Config{})
	f.nextRunPassesTheWatermark(t, "rv2", 15) // stream 11–15
}

// nextRunPassesTheWatermark records a second run y of session, whose
// events end at stream sequence end, after the session's first run x, and
// fails unless the tape holds both and the events watermark passes y's
// end within the read-your-writes bound.
func (f *fixture) nextRunPassesTheWatermark(t *testing.T, session string, end uint64) {
	t.Helper()
	y := newRun(session, "env-"+session+"-y", 2, "next question", "next answer")
	f.publish(t, y, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		entries, err := f.store.Fetch(context.Background(), session, tape.All())
		return err == nil && kinds(entries) == oneRun+" "+oneRun, fmt.Sprintf("tape %s (%v), want x then y", kinds(entries), err)
	})
	f.watermarkWithin(t, session, end, readYourWrites, "y's run.finished, committed, the session's newest run end")
}

// Before the fix: a late copy of an event of a run the tape already
// holds reaches a recorder that does not remember the run (it restarted
// since, or the run left the lane's done memory): here the committed run's
// run.finished stored again (a publish retried outside the dedupe window;
// a redelivery whose ack was lost behaves the same). handle opens a new
// run for it with rn.end set; it is never complete (no seq 1), and the
// tape is asked whether it holds the run only when IdleRun (10 min)
// interrupts it (lane.interrupt → committed). Until then lane.watermark
// caps every commit of the session below the copy, so the next run's
// commit cannot move the watermark past its own end and every turn of the
// session waits out its read-your-writes bound for 10 minutes.
// (TestCommittedRunSeenAgainDoesNotHoldItsOwnCopy passes only because it
// sets IdleRun to 300 ms and commits no later run.)
// Expected: the next run's commit moves the watermark past its end.
func TestLateCopyOfACommittedRunDoesNotHoldLaterRuns(t *testing.T) {
	f := setup(t)
	x, ids := f.recordedByAnEarlierRecorder(t, "rv3") // stream 1–5
	f.publishOne(t, x, 4, ids, false)                 // x's run.finished again: stream 6
	f.startRecorder(t, recorder.Config{})
	f.nextRunPassesTheWatermark(t, "rv3", 11) // stream 7–11
}

// Before the fix: the commit of an event of no run (the CLI's `bub
// tape handoff`/note, a run end without run id) that fails is not held
// like a run's (commitRun, retry): handle's runID == "" branch hands the
// event back with nak and forgets it, so lane.watermark, which only looks
// at held runs (l.runs), lets the commit of the session's next run move
// the events watermark past the event while it is not on the tape. The
// CLI, which waits for the watermark to pass its event
// (bubcmd publishTapeEvent), reports the anchor added, and a turn that
// waited for the watermark reads a tape without it.
// Expected: while the event is not committed, the session's watermark
// stays below it (the event held and retried like a run whose commit
// failed).
func TestFailedCommitOfAnEventOfNoRunHoldsTheWatermark(t *testing.T) {
	f := setup(t)
	st := &failingStore{JetStreamStore: f.store, fails: func(e tape.Entry) bool { return e.Kind == tape.KindEvent && e.Payload["name"] == "rare_note" }}
	st.blocked.Store(true)
	f.startRecorderOn(t, recorder.Config{}, st)
	note := &runEvents{session: "rv4"}
	note.list = []events.Event{&events.TapeEventRecorded{Meta: events.Meta{SessionID: "rv4"}, Name: "rare_note", Data: map[string]any{"x": 1.0}}}
	at := f.publishOne(t, note, 0, map[int]string{}, false) // stream 1, its commit fails
	y := newRun("rv4", "env-rv4", 1, "hi", "hello")
	f.publish(t, y, []int{0, 1, 2, 3, 4}, map[int]string{}, false) // stream 2–6
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		entries, err := f.store.Fetch(context.Background(), "rv4", tape.All())
		return err == nil && kinds(entries) == oneRun && st.attempts.Load() > 0,
			fmt.Sprintf("tape %s (%v), %d attempts at the note; want y committed and the note tried", kinds(entries), err, st.attempts.Load())
	})
	entries, err := f.store.Fetch(context.Background(), "rv4", tape.All())
	if err != nil {
		t.Fatal(err)
	}
	if w := f.eventsWatermark(t, "rv4"); w >= at {
		t.Fatalf("events watermark %d passed the event of no run at %d while it is not on the tape (tape: %s)", w, at, kinds(entries))
	}
	// Once the tape takes it again, the retried commit records the event
	// and the watermark passes both.
	st.blocked.Store(false)
	f.watermarkWithin(t, "rv4", 6, readYourWrites, "the retried event of no run and y's run.finished")
	if entries, err := f.store.Fetch(context.Background(), "rv4", tape.All()); err != nil || !strings.Contains(kinds(entries), "event:rare_note") {
		t.Fatalf("tape %s (%v), want the event of no run on it", kinds(entries), err)
	}
}
