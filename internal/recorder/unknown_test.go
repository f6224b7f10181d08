package recorder_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/taperec"
)

// orderReviewed is a custom event of a plugin author's worker, registered
// with its bridge's codec: the recorder does not know its type.
type orderReviewed struct {
	events.Meta
	OrderID string `json:"order_id"`
}

// TestUnknownEventOfARunKeepsItsPlace: a worker whose bridge has a
// Registry publishes a custom event in the middle of a run, numbered like
// the others. The recorder does not know its type and records nothing for
// it, but the event takes its seq's place in the run (held, and acked with
// the run's commit), so the run completes and is committed at once
// instead of waiting out IdleRun and being recorded as interrupted. An
// unknown event outside a run (no run id), or without a seq, is acked at
// once and recorded nowhere.
func TestUnknownEventOfARunKeepsItsPlace(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	var reg events.Registry
	if err := events.RegisterType[*orderReviewed](&reg, "com.example.order.reviewed.v1"); err != nil {
		t.Fatal(err)
	}
	br, err := events.NewBridge(f.js, f.names, events.Source("worker", "test"), events.WithCodec(events.Codec{Registry: &reg}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = br.Close(context.Background()) })
	var bus events.Bus
	att := br.Attach(&bus)
	defer att.Detach()
	emit := func(evs ...events.Event) {
		t.Helper()
		for _, ev := range evs {
			if _, err := events.Emit(ctx, &bus, ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := att.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	const session = "s11"
	emit(&orderReviewed{Meta: events.Meta{SessionID: session}, OrderID: "A0"}) // no run id, no seq
	r := newRun(session, "env-11", 1, "hi", "hello")
	noSeq := `{"specversion":"1.0","id":"noseq-1","source":"/x","type":"com.example.order.reviewed.v1","subject":"` + session +
		`","runid":"` + r.id + `","datacontenttype":"application/json","data":{"order_id":"A2"}}`
	if _, err := f.js.Publish(ctx, f.names.Event(session, "com.example.order.reviewed"), []byte(noSeq)); err != nil {
		t.Fatal(err)
	}
	list := slices.Insert(r.list, 2, events.Event(&orderReviewed{Meta: events.Meta{RunID: r.id, SessionID: session}, OrderID: "A1"}))

	emit(list[:3]...) // run.started, step.started, the custom event (seq 3)
	f.waitRecorderConsumer(t, 10*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 3 && info.NumPending == 0,
			fmt.Sprintf("ack pending %d, pending %d; want the run's 3 events held (the custom one too) and the 2 outside it acked", info.NumAckPending, info.NumPending)
	})
	emit(list[3:]...)
	entries := f.settled(t, session)
	if got := kinds(entries); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 0 && info.NumPending == 0, fmt.Sprintf("ack pending %d, pending %d, want 0", info.NumAckPending, info.NumPending)
	})
	ix, err := f.store.Index(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Commits) != 1 || ix.Commits[0].ID != r.id+"@env-11" {
		t.Fatalf("commits %+v, want only the run's", ix.Commits)
	}
}

// TestWrongTypedHandoffIsDeadLettered: a handoff whose state is not an
// object cannot be recorded as it was meant (the anchor would keep no
// state, the summary the later context starts from), so it is
// dead-lettered as invalid instead of being recorded without it.
func TestWrongTypedHandoffIsDeadLettered(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	bad := `{"specversion":"1.0","id":"handoff-1","source":"/x","type":"dev.bub.tape.event.v1","subject":"s12","datacontenttype":"application/json",` +
		`"data":{"name":"handoff","data":{"name":"phase-1","state":"the summary"}}}`
	if _, err := f.js.Publish(t.Context(), f.names.Event("s12", "tape.event"), []byte(bad)); err != nil {
		t.Fatal(err)
	}
	f.wantDeadLetter(t, dlq.ReasonInvalid, "state")
	r := newRun("s12", "env-12", 1, "hi", "hello")
	f.publish(t, r, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	if got := kinds(f.settled(t, "s12")); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}

// TestWrongTypedResetIsDeadLettered: a tape.reset whose archive is not a
// bool would reset the tape without archiving it, its entries lost. It is
// dead-lettered as invalid and the tape keeps its entries; the event
// keeps its place in its run, which is recorded at once without it (the
// default IdleRun, ten minutes, would outlast the test) instead of held
// and then recorded as interrupted.
func TestWrongTypedResetIsDeadLettered(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	first := newRun("s13", "env-13", 1, "hi", "hello")
	f.publish(t, first, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	f.settled(t, "s13")
	r := &runEvents{id: events.NewID(), session: "s13"}
	meta := events.Meta{RunID: r.id, SessionID: r.session}
	r.list = []events.Event{
		&events.TapeEventRecorded{Meta: meta, Name: taperec.EventReset, Data: map[string]any{"archive": "yes"}},
		&events.RunFinished{Meta: meta, Status: events.RunOK},
	}
	f.publish(t, r, []int{0, 1}, map[int]string{}, false)
	if got, want := kinds(f.settled(t, "s13")), oneRun+" event:loop.finish"; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	f.wantDeadLetter(t, dlq.ReasonInvalid, "archive")
}

// TestDeadLetteredRunEndStillEndsItsRun: a run.finished whose data does
// not decode is dead-lettered as invalid, and it still ends its run: the
// run is recorded at once without it (the default IdleRun, ten minutes,
// would outlast the test), so the session's events watermark passes it
// and the session's next turn waits for nothing.
func TestDeadLetteredRunEndStillEndsItsRun(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := newRun("s14", "env-14", 1, "hi", "hello")
	f.publish(t, r, []int{0, 1, 2, 3}, map[int]string{}, false)
	end := `{"specversion":"1.0","id":"end-14","source":"/x","type":"` + events.TypeRunFinished + `","subject":"s14","runid":"` + r.id +
		`","seq":5,"datacontenttype":"application/json","data":{"status":7}}`
	if _, err := f.js.Publish(t.Context(), f.names.Event("s14", events.SubjectName(events.TypeRunFinished)), []byte(end)); err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(oneRun, " event:loop.finish")
	if got := kinds(f.settled(t, "s14")); got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	f.wantDeadLetter(t, dlq.ReasonInvalid, "status")
}

// TestHeldRunWithADeadLetteredEventOutlivesSweeps: a run still running
// (its model or a tool is slow) holds its events, the dead-lettered one
// too, and the recorder keeps them alive at every sweep until the run
// ends and is recorded without it.
func TestHeldRunWithADeadLetteredEventOutlivesSweeps(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{Sweep: 5 * time.Millisecond})
	r := newRun("s15", "env-15", 1, "hi", "hello")
	bad := &events.TapeEventRecorded{Meta: events.Meta{RunID: r.id, SessionID: r.session}, Name: taperec.EventHandoff,
		Data: map[string]any{"name": "phase-1", "state": "not an object"}}
	r.list = slices.Insert(r.list, 1, events.Event(bad))
	f.publish(t, r, []int{0, 1}, map[int]string{}, false)
	f.wantDeadLetter(t, dlq.ReasonInvalid, "state")
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 2 && info.NumPending == 0,
			fmt.Sprintf("ack pending %d, pending %d; want run.started and the dead-lettered event held", info.NumAckPending, info.NumPending)
	})
	time.Sleep(100 * time.Millisecond) // about 20 sweeps of the held run
	f.publish(t, r, []int{2, 3, 4, 5}, map[int]string{}, false)
	if got := kinds(f.settled(t, "s15")); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}

// TestDeadLetteredEventOfAHeldRunSurvivesARestart: a run's event is
// dead-lettered while the run is held, and the recorder restarts before
// the run ends (a deploy). The dead-lettered event was held with the run,
// not acknowledged: the next recorder gets it again, dead-letters it
// again (stored once: its dead letter's id is its stream sequence) and
// records the run without it at once, instead of holding the run (and
// the session's watermark) for IdleRun and recording it as interrupted.
func TestDeadLetteredEventOfAHeldRunSurvivesARestart(t *testing.T) {
	f := setup(t)
	stop := f.startRecorder(t, recorder.Config{})
	r := newRun("s16", "env-16", 1, "hi", "hello")
	ids := map[int]string{}
	f.publishOne(t, r, 0, ids, false)
	f.publishOne(t, r, 1, ids, true) // step.started, its data corrupt
	f.wantDeadLetter(t, dlq.ReasonInvalid, "")
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 2 && info.NumPending == 0,
			fmt.Sprintf("ack pending %d, pending %d; want run.started and the dead-lettered event held", info.NumAckPending, info.NumPending)
	})
	stop()
	f.startRecorder(t, recorder.Config{})
	for _, i := range []int{2, 3, 4} {
		f.publishOne(t, r, i, ids, false)
	}
	want := strings.Join([]string{runKinds[0], runKinds[2], runKinds[3], runKinds[4]}, " ")
	if got := kinds(f.settled(t, "s16")); got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	if n := f.streamState(t, f.names.DLQStream()).Msgs; n != 1 {
		t.Fatalf("%d dead letters, want 1 (the event, dead-lettered by both recorders)", n)
	}
}
