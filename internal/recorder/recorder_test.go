package recorder_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
)

type fixture struct {
	js    jetstream.JetStream
	names subjects.Names
	store *tape.JetStreamStore
	state jetstream.KeyValue
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupOn(t, natstest.Start(t))
}

// setupOn is [setup] on server s.
func setupOn(t *testing.T, s *natstest.Server) *fixture {
	t.Helper()
	_, js := s.JetStream(t)
	names := subjects.Default()
	ctx := context.Background()
	if err := natsx.EnsureTopology(ctx, js, names, natsx.Topology{}); err != nil {
		t.Fatal(err)
	}
	store, err := tape.NewJetStreamStore(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	state, err := js.KeyValue(ctx, names.StateBucket())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{js: js, names: names, store: store, state: state}
}

// startRecorder runs a recorder until the returned stop is called.
func (f *fixture) startRecorder(t *testing.T, cfg recorder.Config) (stop func()) {
	t.Helper()
	return f.startRecorderOn(t, cfg, f.store)
}

// startRecorderOn is [fixture.startRecorder] writing to store.
func (f *fixture) startRecorderOn(t *testing.T, cfg recorder.Config, store recorder.Store) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := recorder.New(cfg, f.js, f.names, store, f.state, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Run(ctx); err != nil {
			t.Errorf("recorder: %v", err)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// runEvents builds the events of one plain run answering envelope env.
type runEvents struct {
	id, session, env string
	inbound          uint64
	list             []events.Event
}

func newRun(session, env string, inbound uint64, prompt, answer string) *runEvents {
	r := &runEvents{id: events.NewID(), session: session, env: env, inbound: inbound}
	meta := events.Meta{RunID: r.id, SessionID: session}
	text := answer
	r.list = []events.Event{
		&events.RunStarted{Meta: meta, Prompt: llm.Text(prompt), Model: "echo:echo",
			Metadata: events.RunMetadata{Answers: events.Answers{EnvelopeID: env, InboundSeq: inbound}}},
		&events.StepStarted{Meta: meta, Step: 1, Prompt: llm.Text(prompt)},
		&events.ChatFinished{Meta: meta, NewMessages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(prompt)}},
			ResponseText: &text, Provider: "echo", Model: "echo:echo"},
		&events.StepFinished{Meta: meta, Step: 1, Status: events.StepOK},
		&events.RunFinished{Meta: meta, Status: events.RunOK, Steps: 1},
	}
	return r
}

// publish sends events with the given indexes (seq = index + 1); with
// dupID the message carries no Nats-Msg-Id, so JetStream stores a second
// copy as a redelivery outside the dedupe window would.
func (f *fixture) publish(t *testing.T, r *runEvents, idx []int, ids map[int]string, dupID bool) {
	t.Helper()
	for _, i := range idx {
		ev := r.list[i]
		id := ids[i]
		if id == "" {
			id = events.NewID()
			ids[i] = id
		}
		ce, err := events.ToCloudEvent(ev, events.Attrs{ID: id, Source: "/bub/worker/test", SessionID: r.session, RunID: r.id, Seq: int64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := events.ToMsg(f.names.Event(r.session, events.SubjectName(ce.Type())), ce)
		if err != nil {
			t.Fatal(err)
		}
		if dupID {
			msg.Header.Del(subjects.HeaderMsgID)
		}
		if _, err := f.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
}

// settled waits until session's committed events watermark reaches the
// newest event published and returns the tape.
func (f *fixture) settled(t *testing.T, session string) []tape.Entry {
	t.Helper()
	return f.settledAt(t, session, f.streamState(t, f.names.EventsStream()).LastSeq)
}

// streamState returns the state of stream.
func (f *fixture) streamState(t *testing.T, stream string) jetstream.StreamState {
	t.Helper()
	st, err := f.js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// settledAt waits until session's committed events watermark reaches
// events-stream sequence seq and returns the tape.
func (f *fixture) settledAt(t *testing.T, session string, seq uint64) []tape.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := f.store.WaitWatermark(ctx, session, taperec.WatermarkEvents, seq); err != nil {
		t.Fatalf("recorder did not commit up to %d: %v", seq, err)
	}
	entries, err := f.store.Fetch(context.Background(), session, tape.All())
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func kinds(entries []tape.Entry) string {
	var out []string
	for _, e := range entries {
		k := e.Kind
		if e.Kind == tape.KindEvent {
			k += ":" + fmt.Sprint(e.Payload["name"])
		}
		if e.Kind == tape.KindMessage {
			k += ":" + fmt.Sprint(e.Payload["role"])
		}
		out = append(out, k)
	}
	return strings.Join(out, " ")
}

const oneRun = "event:loop.start event:loop.step.start message:user message:assistant event:run event:loop.step event:loop.finish"

func TestCommitsARunAtomicallyInSeqOrder(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := newRun("s1", "env-1", 7, "hi", "hello")
	f.publish(t, r, []int{0, 2, 1, 3, 4}, map[int]string{}, false) // reordered
	entries := f.settled(t, "s1")
	if got := kinds(entries); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
	for i, e := range entries {
		if e.ID != int64(i+1) || e.Meta["run_id"] != r.id {
			t.Fatalf("entry %d: id %d meta %v", i, e.ID, e.Meta)
		}
	}
}

// TestWatermarkStopsBeforeAnUncommittedFinishedRun: run x of a session
// finished (stream sequence 4) but one of its events is still to come; run
// y, which finished after it, is committed first. The events watermark
// must stay below x's end until x is committed too: a turn that waits for
// it to pass the session's newest run end (y's) must find x on the tape.
func TestWatermarkStopsBeforeAnUncommittedFinishedRun(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	x, y := newRun("s9", "env-x", 1, "first", "one"), newRun("s9", "env-y", 2, "second", "two")
	xids := map[int]string{}
	f.publish(t, x, []int{0, 1, 3, 4}, xids, false) // stream 1–4; seq 3 missing
	f.publish(t, y, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	natstest.Eventually(t, 15*time.Second, func() (bool, string) {
		entries, err := f.store.Fetch(context.Background(), "s9", tape.All())
		return err == nil && len(entries) > 0, fmt.Sprintf("y not committed: %d entries, %v", len(entries), err)
	})
	ix, err := f.store.Index(context.Background(), "s9")
	if err != nil {
		t.Fatal(err)
	}
	if w := ix.Watermark(taperec.WatermarkEvents); w != 3 {
		t.Fatalf("events watermark %d after y's commit, want 3 (just before x's run.finished at 4)", w)
	}
	f.publish(t, x, []int{2}, xids, false) // stream 10: x is complete
	entries := f.settled(t, "s9")
	if got, want := kinds(entries), oneRun+" "+oneRun; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
}

func TestDuplicatedEventsNeverDuplicateEntries(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := newRun("s2", "env-2", 1, "hi", "hello")
	ids := map[int]string{}
	f.publish(t, r, []int{0, 1, 2}, ids, false)
	f.publish(t, r, []int{0, 2}, ids, true) // the same events stored again
	f.publish(t, r, []int{1}, ids, false)   // deduplicated by JetStream
	f.publish(t, r, []int{3, 4}, ids, false)
	f.publish(t, r, []int{4}, ids, true) // RunFinished again, after the commit
	entries := f.settled(t, "s2")
	if got := kinds(entries); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}

// TestRedeliveredRunInterruptsTheDeadOne: a worker died mid-run (no
// RunFinished), the envelope was redelivered and another run answered it.
// The dead run leaves only an interrupted marker, out of context.
func TestRedeliveredRunInterruptsTheDeadOne(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	dead := newRun("s3", "env-3", 4, "first try", "never finished")
	f.publish(t, dead, []int{0, 1, 2}, map[int]string{}, false)
	again := newRun("s3", "env-3", 4, "second try", "done")
	f.publish(t, again, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	entries := f.settled(t, "s3")
	if got, want := kinds(entries), "event:run.interrupted "+oneRun; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	if entries[0].InContext() || entries[0].Payload["data"].(map[string]any)["superseded_by"] != again.id {
		t.Fatalf("interrupted marker %+v", entries[0])
	}
	for _, e := range entries {
		if strings.Contains(fmt.Sprint(e.Payload), "never finished") {
			t.Fatalf("the dead run's partial entries reached the tape: %+v", e)
		}
	}
}

func TestIdleRunIsInterrupted(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{IdleRun: 50 * time.Millisecond, Sweep: 10 * time.Millisecond})
	dead := newRun("s4", "env-4", 1, "hi", "x")
	f.publish(t, dead, []int{0, 1}, map[int]string{}, false)
	entries := f.settled(t, "s4")
	if got := kinds(entries); got != "event:run.interrupted" {
		t.Fatalf("tape = %s", got)
	}
	// The run's held events are acknowledged with the marker's commit, not
	// left to come back after the ack wait.
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 0 && info.NumPending == 0, fmt.Sprintf("ack pending %d, pending %d, want 0", info.NumAckPending, info.NumPending)
	})
}

// TestRecorderRestartMidRun stops the recorder while a run is half
// delivered; the next recorder gets the unacknowledged events again and
// commits the run exactly once.
func TestRecorderRestartMidRun(t *testing.T) {
	f := setup(t)
	stop := f.startRecorder(t, recorder.Config{})
	r := newRun("s5", "env-5", 2, "hi", "hello")
	ids := map[int]string{}
	f.publish(t, r, []int{0, 1, 2}, ids, false)
	f.waitRecorderConsumer(t, 10*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 3, fmt.Sprintf("ack pending %d, want 3", info.NumAckPending)
	})
	stop()
	f.startRecorder(t, recorder.Config{})
	f.publish(t, r, []int{3, 4}, ids, false)
	entries := f.settled(t, "s5")
	if got := kinds(entries); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}

func TestStandaloneTapeEventsAndSwitches(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := &runEvents{id: events.NewID(), session: "s6"}
	meta := events.Meta{RunID: r.id, SessionID: "s6"}
	r.list = []events.Event{
		&events.TapeEventRecorded{Meta: meta, Name: taperec.EventHandoff, Data: map[string]any{"name": "phase-1", "state": map[string]any{"summary": "x"}}},
		&events.TapeEventRecorded{Meta: meta, Name: "model_switch", Data: map[string]any{"model": "openai:gpt-4o"}},
		&events.RunFinished{Meta: meta, Status: events.RunOK},
	}
	f.publish(t, r, []int{0, 1, 2}, map[int]string{}, false)
	entries := f.settled(t, "s6")
	if got, want := kinds(entries), "anchor event:handoff event:model_switch event:loop.finish"; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	e, err := f.state.Get(context.Background(), f.names.SwitchesKey("s6"))
	if err != nil || !strings.Contains(string(e.Value()), "openai:gpt-4o") {
		t.Fatalf("switches not saved: %v %v", e, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestCommandRunMovesTheEventsWatermark records a comma command's run
// (tool events and CommandFinished, no RunStarted): its commit moves the
// events watermark to its CommandFinished, which the session's next turn
// waits for (read-your-writes).
func TestCommandRunMovesTheEventsWatermark(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := &runEvents{id: events.NewID(), session: "cmd", env: "env-c", inbound: 9}
	meta := events.Meta{RunID: r.id, SessionID: r.session}
	r.list = []events.Event{
		&events.CommandFinished{Meta: meta, Command: "tape.info", Name: "tape.info", Status: events.CommandOK, Output: "entries: 0",
			Answers: &events.Answers{EnvelopeID: r.env, InboundSeq: r.inbound, Delivery: 1}},
	}
	f.publish(t, r, []int{0}, map[int]string{}, false)
	entries := f.settled(t, "cmd")
	if got := kinds(entries); got != "event:command" {
		t.Fatalf("tape = %s, want the command entry", got)
	}
	ix, _ := f.store.Index(context.Background(), "cmd")
	if got := ix.Watermark(taperec.WatermarkEvents); got != 1 {
		t.Fatalf("events watermark %d after the command's run, want 1 (its command.finished)", got)
	}
}

// Bub's switches live on the tape, so tape.reset forgets them: a reset
// after a model switch leaves the session on the default model, and a
// switch after the reset in the same run is kept.
func TestTapeResetClearsTheSwitches(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	run := func(session string, evs ...func(events.Meta) events.Event) {
		t.Helper()
		r := &runEvents{id: events.NewID(), session: session}
		meta := events.Meta{RunID: r.id, SessionID: session}
		idx := make([]int, 0, len(evs)+1)
		for i, ev := range evs {
			r.list = append(r.list, ev(meta))
			idx = append(idx, i)
		}
		r.list = append(r.list, &events.RunFinished{Meta: meta, Status: events.RunOK})
		f.publish(t, r, append(idx, len(evs)), map[int]string{}, false)
		f.settled(t, session)
	}
	tapeEvent := func(name string, data map[string]any) func(events.Meta) events.Event {
		return func(m events.Meta) events.Event { return &events.TapeEventRecorded{Meta: m, Name: name, Data: data} }
	}
	switches := func(session string) string {
		t.Helper()
		e, err := f.state.Get(context.Background(), f.names.SwitchesKey(session))
		if err != nil {
			return "none (" + err.Error() + ")"
		}
		return string(e.Value())
	}
	run("s7", tapeEvent("model_switch", map[string]any{"model": "echo:two"}), tapeEvent("reasoning_effort_switch", map[string]any{"reasoning_effort": "high"}))
	if got := switches("s7"); !strings.Contains(got, "echo:two") || !strings.Contains(got, "high") {
		t.Fatalf("switches after ,model and ,reasoning_effort = %s", got)
	}
	run("s7", tapeEvent(taperec.EventReset, map[string]any{"archive": false}))
	if got := switches("s7"); strings.Contains(got, "echo:two") || strings.Contains(got, "high") {
		t.Fatalf("switches after tape.reset = %s, want none", got)
	}
	run("s8", tapeEvent("model_switch", map[string]any{"model": "echo:one"}), tapeEvent("reasoning_effort_switch", map[string]any{"reasoning_effort": "low"}))
	run("s8", tapeEvent(taperec.EventReset, map[string]any{"archive": false}), tapeEvent("model_switch", map[string]any{"model": "echo:two"}))
	if got := switches("s8"); !strings.Contains(got, "echo:two") || strings.Contains(got, "low") {
		t.Fatalf("switches after a reset then ,model echo:two = %s, want only the new model", got)
	}
}

// A worker that died between a new session's bootstrap handoff and its
// run.started leaves a run of that one event. The turn's next delivery
// hands off again itself and drops the orphan: nothing stays held (no
// recorder lag until IdleRun), no run.interrupted is recorded for a run
// that never started, and the tape holds the rerun once.
func TestRedeliveredRunDropsTheBootstrapOrphan(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	handoff := func(meta events.Meta) events.Event {
		return &events.TapeEventRecorded{Meta: meta, Name: taperec.EventHandoff, Data: map[string]any{"name": tape.BootstrapAnchor, "state": tape.BootstrapState()}}
	}
	orphan := &runEvents{id: events.NewID(), session: "s9"}
	orphan.list = []events.Event{handoff(events.Meta{RunID: orphan.id, SessionID: "s9"})}
	f.publish(t, orphan, []int{0}, map[int]string{}, false)

	rerun := newRun("s9", "env-9", 3, "hi", "hello")
	rerun.list[0].(*events.RunStarted).Metadata.Answers.Delivery = 2
	rerun.list = append([]events.Event{handoff(events.Meta{RunID: rerun.id, SessionID: "s9"})}, rerun.list...)
	f.publish(t, rerun, []int{0, 1, 2, 3, 4, 5}, map[int]string{}, false)

	entries := f.settled(t, "s9")
	if got, want := kinds(entries), "anchor event:handoff "+oneRun; got != want {
		t.Fatalf("tape = %s\nwant  %s", got, want)
	}
	for _, e := range entries {
		if e.Meta["run_id"] != rerun.id {
			t.Fatalf("entry %d of run %v, want only the rerun's", e.ID, e.Meta["run_id"])
		}
	}
	f.waitRecorderConsumer(t, 5*time.Second, func(info *jetstream.ConsumerInfo) (bool, string) {
		return info.NumAckPending == 0 && info.NumPending == 0, fmt.Sprintf("ack pending %d, pending %d", info.NumAckPending, info.NumPending)
	})
}

// waitRecorderConsumer waits up to d until the recorder's durable
// consumer's state satisfies ok.
func (f *fixture) waitRecorderConsumer(t *testing.T, d time.Duration, ok func(*jetstream.ConsumerInfo) (bool, string)) {
	t.Helper()
	cons, err := f.js.Consumer(t.Context(), f.names.EventsStream(), f.names.RecorderConsumer())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, d, func() (bool, string) {
		info, err := cons.Info(t.Context())
		if err != nil {
			return false, err.Error()
		}
		return ok(info)
	})
}

// TestOverlongSessionIsDeadLettered: an event whose CloudEvent subject
// (the session, which names a tape subject) is longer than a name may be
// is dead-lettered as invalid_envelope with the reason, instead of making
// the recorder send a subject the server refuses, which closes the
// connection every session's commits share; the next run is recorded.
func TestOverlongSessionIsDeadLettered(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	long := strings.Repeat("a", 5000)
	body := `{"specversion":"1.0","id":"long-1","source":"/x","type":"dev.bub.tape.event.v1","subject":"` + long + `","datacontenttype":"application/json","data":{"name":"note","data":{}}}`
	if _, err := f.js.Publish(t.Context(), f.names.Event("s7", "tape.event"), []byte(body)); err != nil {
		t.Fatal(err)
	}
	f.wantDeadLetter(t, dlq.ReasonInvalid, "5000 bytes")
	r := newRun("s8", "env-8", 1, "hi", "hello")
	f.publish(t, r, []int{0, 1, 2, 3, 4}, map[int]string{}, false)
	if got := kinds(f.settled(t, "s8")); got != oneRun {
		t.Fatalf("tape after the dead letter = %s\nwant  %s", got, oneRun)
	}
}

// wantDeadLetter waits for the first dead letter and checks its reason
// and that its error contains cause.
func (f *fixture) wantDeadLetter(t *testing.T, reason, cause string) {
	t.Helper()
	cons, err := f.js.CreateConsumer(t.Context(), f.names.DLQStream(), jetstream.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	if got, err := m.Headers().Get(subjects.HeaderDLQReason), m.Headers().Get(subjects.HeaderDLQError); got != reason || !strings.Contains(err, cause) {
		t.Fatalf("dead letter %q: %q; want %q with %q", got, err, reason, cause)
	}
}

// TestRunEventWithoutSeqIsDeadLettered: an event of a run carries the
// run's seq (1, 2, 3, …), by which the recorder orders the run and knows
// it complete. One without it, or with one below 1, is dead-lettered as
// invalid_envelope: before, a run.finished with seq -1 committed the run
// at once, half of it, and its later events were acknowledged and lost.
func TestRunEventWithoutSeqIsDeadLettered(t *testing.T) {
	f := setup(t)
	f.startRecorder(t, recorder.Config{})
	r := newRun("s9", "env-9", 1, "hi", "hello")
	ids := map[int]string{}
	f.publish(t, r, []int{0}, ids, false)
	bogus := `{"specversion":"1.0","id":"fin-1","source":"/x","type":"dev.bub.run.finished.v1","subject":"s9","runid":"` + r.id + `","seq":-1,"datacontenttype":"application/json","data":{"status":"ok","steps":1}}`
	if _, err := f.js.Publish(t.Context(), f.names.Event("s9", "run.finished"), []byte(bogus)); err != nil {
		t.Fatal(err)
	}
	f.wantDeadLetter(t, dlq.ReasonInvalid, "seq")
	f.publish(t, r, []int{1, 2, 3, 4}, ids, false)
	if got := kinds(f.settled(t, "s9")); got != oneRun {
		t.Fatalf("tape = %s\nwant  %s", got, oneRun)
	}
}
