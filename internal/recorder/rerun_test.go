package recorder_test

import (
	"testing"

	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/events"
)

// TestSecondFinishedRunOfAnEnvelopeIsNotRecorded: an envelope whose first
// run finished but was never acknowledged (the worker or NATS died before
// the ack) is redelivered and runs again; the tape keeps the first run
// and records the second only as interrupted (superseded), and the later
// turns of the session are recorded as usual.
func TestSecondFinishedRunOfAnEnvelopeIsNotRecorded(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	first := newRun("s9", "env-9", 3, "question", "first answer")
	f.publish(t, first, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	f.settled(t, "s9")
	again := newRun("s9", "env-9", 3, "question", "second answer")
	f.publish(t, again, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	next := newRun("s9", "env-10", 5, "next question", "next answer")
	f.publish(t, next, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	entries := f.settled(t, "s9")
	if got, want := kinds(entries), oneRun+" event:run.interrupted "+oneRun; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	for _, e := range entries {
		if e.Meta["run_id"] == again.id && e.InContext() {
			t.Fatalf("the rerun reached the tape: %+v", e)
		}
	}
}

// TestStaleRunOfAnAnsweredEnvelopeIsInterrupted: the events of a first
// delivery's run arrive only after the redelivery's run was committed
// (they were held back while NATS was down); the stale run is recorded as
// interrupted at once instead of waiting for a RunFinished that never
// comes.
func TestStaleRunOfAnAnsweredEnvelopeIsInterrupted(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	again := newRun("s10", "env-11", 4, "question", "answer")
	again.list[0].(*events.RunStarted).Metadata.Delivery = 2
	f.publish(t, again, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	f.settled(t, "s10")
	stale := newRun("s10", "env-11", 4, "question", "never finished")
	stale.list[0].(*events.RunStarted).Metadata.Delivery = 1
	f.publish(t, stale, []int{0, 1}, map[int]string{}, false)
	entries := f.settled(t, "s10")
	if got, want := kinds(entries), oneRun+" event:run.interrupted"; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
}

// TestFailedRunDoesNotClaimItsEnvelope: a run that failed (here: while
// NATS was unavailable) and was retried leaves its own entries, and the
// retry that succeeded is recorded as well.
func TestFailedRunDoesNotClaimItsEnvelope(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	failed := newRun("s11", "env-12", 6, "question", "lost")
	failed.list = []events.Event{failed.list[0], failed.list[1],
		&events.StepFinished{Meta: events.Meta{RunID: failed.id, SessionID: "s11"}, Step: 1, Status: events.StepError},
		&events.RunFinished{Meta: events.Meta{RunID: failed.id, SessionID: "s11"}, Status: events.RunError, Steps: 1}}
	f.publish(t, failed, []int{0, 1, 2, 3}, map[int]string{}, false)
	f.settled(t, "s11")
	retry := newRun("s11", "env-12", 6, "question", "answer")
	retry.list[0].(*events.RunStarted).Metadata.Delivery = 2
	f.publish(t, retry, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	entries := f.settled(t, "s11")
	n := 0
	for _, e := range entries {
		if e.Meta["run_id"] == retry.id && e.Kind == "message" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the successful retry is not on the tape: %s", kinds(entries))
	}
}

// TestResumedRunReplacesTheInterruptedOne: a run whose worker died is
// resumed by the redelivery's run (run.started names it in
// metadata.resumes); the tape holds the resumed run once and no
// interrupted run, and late events of the dead run change nothing.
func TestResumedRunReplacesTheInterruptedOne(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	dead := newRun("s12", "env-13", 7, "question", "never finished")
	f.publish(t, dead, []int{0, 1}, map[int]string{}, false)
	resumed := newRun("s12", "env-13", 7, "question", "answer")
	started := resumed.list[0].(*events.RunStarted)
	started.Metadata.Delivery, started.Metadata.Resumes = 2, dead.id
	f.publish(t, resumed, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	f.publish(t, dead, []int{2}, map[int]string{}, false) // a late event of the dead run
	entries := f.settled(t, "s12")
	if got := kinds(entries); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
	for _, e := range entries {
		if e.Meta["run_id"] != resumed.id {
			t.Fatalf("an entry of another run than the resumed one: %+v", e)
		}
	}
}

// TestReplayOfACommittedRunIsNotRecorded: a run that finished and was
// committed but never acknowledged is replayed by the redelivery (it
// resumes it); the replay is skipped, not recorded as interrupted.
func TestReplayOfACommittedRunIsNotRecorded(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	first := newRun("s13", "env-14", 8, "question", "answer")
	f.publish(t, first, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	f.settled(t, "s13")
	replay := newRun("s13", "env-14", 8, "question", "answer")
	started := replay.list[0].(*events.RunStarted)
	started.Metadata.Delivery, started.Metadata.Resumes = 2, first.id
	f.publish(t, replay, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	next := newRun("s13", "env-15", 9, "next question", "next answer")
	f.publish(t, next, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	if got, want := kinds(f.settled(t, "s13")), oneRun+" "+oneRun; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
}
