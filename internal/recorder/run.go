package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
	"github.com/bubbus/bub/pkg/tools"
)

// lane commits the runs of the sessions hashed to it, one event at a time.
type lane struct {
	r    *Recorder
	in   chan jetstream.Msg
	runs map[string]*run // by run id
	// done remembers recently committed runs, so a late duplicate of one
	// of their events is recognised.
	done recent[bool]
	// answered remembers the run that committed each recently answered
	// envelope, so a stale run of it is recognised.
	answered recent[string]
	// behind is, by session, the events watermark a commit could not
	// write because a held run of the session ended below it (see
	// [lane.watermark]); the session's next watermark write takes it.
	behind map[string]uint64
}

// maxDone bounds a [recent].
const maxDone = 4096

// recent remembers the value put for each key of its last maxDone puts,
// forgetting the oldest first. The zero value is empty.
type recent[V any] struct {
	m     map[string]V
	order []string
}

func (r *recent[V]) put(key string, v V) {
	if r.m == nil {
		r.m = map[string]V{}
	}
	r.m[key] = v
	r.order = append(r.order, key)
	if len(r.order) > maxDone {
		delete(r.m, r.order[0])
		r.order = r.order[1:]
	}
}

func (r *recent[V]) get(key string) (V, bool) {
	v, ok := r.m[key]
	return v, ok
}

// run buffers the events of one run until it finishes.
type run struct {
	id       string
	session  string
	envelope string // inbound envelope id, from run.started
	items    []item
	seen     map[string]bool // event ids
	last     time.Time
	finished int64 // seq of RunFinished, 0 until it arrived
	// end is the events-stream sequence of RunFinished (0 until it
	// arrived): see [lane.watermark].
	end uint64
	// interrupted is set when only the run's interruption is recorded.
	interrupted bool
	// delivery is the inbound delivery the run answered (from run.started).
	delivery uint64
	// resumes is the run this one resumes (from run.started), "" for none.
	resumes string
	// answers is set when the run finished well (status ok, or a command
	// that was not cancelled): it answered its envelope, and a later run of
	// the same envelope is a redundant rerun.
	answers bool
	// retry is set when the complete run's commit failed: it stays held,
	// its end holding the session's watermark below it, and is committed
	// again every [retryEvery].
	retry bool
}

// retryEvery is how often a lane commits again the runs whose commit
// failed.
const retryEvery = time.Second

// item is one buffered event.
type item struct {
	seq     int64
	stream  uint64
	batch   taperec.Batch
	msg     jetstream.Msg // nil for the marker of an interrupted run
	payload any
}

func (l *lane) loop(ctx context.Context) {
	sweep := time.NewTicker(l.r.cfg.Sweep)
	defer sweep.Stop()
	retry := time.NewTicker(retryEvery)
	defer retry.Stop()
	for {
		select {
		case msg, ok := <-l.in:
			if !ok {
				l.handBack()
				return
			}
			l.handle(ctx, msg)
		case <-sweep.C:
			l.sweep(ctx)
		case <-retry.C:
			for _, rn := range l.runs {
				if rn.retry {
					l.commitRun(ctx, rn)
				}
			}
		}
	}
}

func (l *lane) handle(ctx context.Context, msg jetstream.Msg) {
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		l.reject(ctx, msg, dlq.ReasonUndecodable, err)
		return
	}
	md, err := msg.Metadata()
	if err != nil {
		l.reject(ctx, msg, dlq.ReasonInvalid, err)
		return
	}
	runID, session, seq := events.RunID(ev), events.SessionID(ev), events.Seq(ev)
	payload, invalid := events.DecodePayload(ev)
	// A type this process cannot know: another application's event, or a
	// custom one registered with a worker's bridge (its codec's Registry),
	// which numbers it in its run like the others. Nothing is recorded
	// for it, but in a run it takes its seq's place, or the run would
	// never be complete.
	unknown := errors.Is(invalid, events.ErrUnknownType)
	if unknown && (runID == "" || seq < 1) {
		_ = msg.Ack()
		return
	}
	if unknown {
		invalid = nil
	} else if invalid == nil {
		// A handoff or reset Map would record without its value.
		invalid = taperec.Check(payload)
	}
	if err := envelope.CheckName("session", session); err != nil {
		// It names the tape's subjects: one past the server's control
		// line would close the connection every lane commits through.
		l.reject(ctx, msg, dlq.ReasonInvalid, err)
		return
	}
	if strings.HasPrefix(session, tools.TempSessionPrefix) {
		_ = msg.Ack() // temporary sessions (subagents) are never recorded
		return
	}
	if invalid == nil && runID != "" && seq < 1 {
		// The bridge numbers every event of a run from 1: the recorder
		// orders the run by it and knows it complete by it.
		invalid = fmt.Errorf("event of run %q with seq %d, not 1 or more", runID, seq)
	}
	if invalid != nil {
		if runID == "" || seq < 1 {
			l.reject(ctx, msg, dlq.ReasonInvalid, invalid)
			if t := ev.Type(); t == events.TypeRunFinished || t == events.TypeCommandFinished {
				// A session's next turn waits for the watermark to pass
				// its newest stored run end, this one too.
				l.duplicate(ctx, session, md.Sequence.Stream, nil)
			}
			return
		}
		// Dead-lettered, it still takes its place in its run, held with
		// no entries and acknowledged with the run's commit, so that the
		// run completes and is recorded without it (also by a recorder
		// that restarts meanwhile: it gets the event again) instead of
		// being held for IdleRun (and the session's events watermark with
		// it) and then recorded as interrupted.
		if err := l.r.dlq.Hold(ctx, msg, dlq.ReasonInvalid, invalid); err != nil {
			l.r.log.Error("recorder.dlq_failed", "err", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		payload = nil
	}
	l.r.log.Debug("recorder.event", "type", ev.Type(), "run", runID, "seq", seq, "stream", md.Sequence.Stream, "delivered", md.NumDelivered)
	batch := taperec.Map(payload, runID, ev.Time())
	if runID == "" {
		if held := l.runs[ev.ID()]; held != nil {
			held.another(item{stream: md.Sequence.Stream, msg: msg}) // a copy of a held event of no run
			return
		}
		if len(batch.Entries) > 0 || batch.Reset {
			// A run of one event, ended by it: when its commit fails it
			// is held and retried as a run is, and holds the session's
			// events watermark below it meanwhile.
			one := &run{id: ev.ID(), session: session, end: md.Sequence.Stream, last: time.Now(),
				items: []item{{stream: md.Sequence.Stream, batch: batch, msg: msg}}}
			l.runs[one.id] = one
			l.commitRun(ctx, one)
			return
		}
		_ = msg.Ack()
		return
	}
	if done, _ := l.done.get(runID); done {
		l.duplicate(ctx, session, md.Sequence.Stream, nil, msg)
		return
	}
	rn := l.runs[runID]
	if rn == nil {
		rn = &run{id: runID, session: session, seen: map[string]bool{}}
		l.runs[runID] = rn
	}
	rn.last = time.Now()
	if rn.seen[ev.ID()] {
		rn.another(item{seq: seq, stream: md.Sequence.Stream, msg: msg, payload: payload})
		return
	}
	rn.seen[ev.ID()] = true
	rn.items = append(rn.items, item{seq: seq, stream: md.Sequence.Stream, batch: batch, msg: msg, payload: payload})
	switch p := payload.(type) {
	case *events.RunStartedData:
		rn.answering(p.Metadata.Answers)
		if rn.resumes = p.Metadata.Resumes; rn.resumes != "" {
			l.resumed(ctx, rn, rn.resumes)
		}
		if l.supersede(ctx, rn, md.NumDelivered > 1) {
			delete(l.runs, runID) // rn itself is stale: recorded as interrupted
			return
		}
	case *events.RunFinishedData, *events.CommandFinishedData:
		// A comma command is a run of its own that ends with
		// CommandFinished (it has no RunStarted/RunFinished).
		rn.finished, rn.end = seq, md.Sequence.Stream
		switch p := p.(type) {
		case *events.RunFinishedData:
			rn.answers = p.Status == events.RunOK
		case *events.CommandFinishedData:
			rn.answers = p.Status != events.RunCancelled
			// The command's inbound envelope (a redelivered command
			// is recognised by it).
			if p.Metadata != nil {
				rn.answering(*p.Metadata)
			}
		}
	case nil:
		if t := ev.Type(); t == events.TypeRunFinished || t == events.TypeCommandFinished {
			// A dead-lettered end still ends its run, which is recorded
			// without it (its status unknown: it claims no envelope)
			// instead of held for IdleRun with the session's watermark.
			rn.finished, rn.end = seq, md.Sequence.Stream
		}
	}
	if rn.end != 0 && !rn.complete() && rn.items[len(rn.items)-1].stream == rn.end && l.committed(ctx, rn) {
		// The end of a run the tape holds, come again to a recorder that
		// does not remember it (restarted since): its other events come
		// late or not at all, and held, it would hold the session's
		// events watermark below its end until IdleRun.
		l.forget(ctx, rn)
		return
	}
	if rn.complete() {
		l.commitRun(ctx, rn)
	}
}

// commitRun commits the complete run rn and forgets it; when the commit
// fails, rn stays held for a retry, so that no commit of another run of
// its session moves the events watermark past rn's end while rn is not
// on the tape.
func (l *lane) commitRun(ctx context.Context, rn *run) {
	if l.commit(ctx, rn) != nil {
		rn.retry = true
		return
	}
	delete(l.runs, rn.id)
}

// nak hands msgs back for redelivery after a second.
func nak(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.NakWithDelay(time.Second)
	}
}

// answering records the inbound envelope the run answers, from the
// metadata of its RunStarted (or of its CommandFinished, for a command).
func (rn *run) answering(a events.Answers) {
	rn.envelope, rn.delivery = a.EnvelopeID, a.Delivery
}

// acknowledge moves session's events watermark to stream sequence at, the
// newest of msgs (events of rn, nil for none; see [lane.watermark]), and
// then acknowledges msgs.
func (l *lane) acknowledge(ctx context.Context, session string, at uint64, rn *run, msgs []jetstream.Msg) error {
	if err := l.appendAt(ctx, session, nil, at, rn); err != nil {
		return err
	}
	for _, m := range msgs {
		_ = m.Ack()
	}
	return nil
}

// duplicate acknowledges msgs, late copies of events of a committed run
// (rn when the lane holds it, else nil) whose newest is at stream
// sequence at; when the watermark cannot be moved to it, they come again.
func (l *lane) duplicate(ctx context.Context, session string, at uint64, rn *run, msgs ...jetstream.Msg) {
	if err := l.acknowledge(ctx, session, at, rn, msgs); err != nil {
		l.r.log.Warn("recorder.watermark_failed", "session", session, "err", err)
		nak(msgs)
	}
}

// forget acknowledges every held event of rn as a late copy, with one
// watermark write (rn's own end does not hold it back), and forgets rn:
// its later events are late copies too.
func (l *lane) forget(ctx context.Context, rn *run) {
	l.duplicate(ctx, rn.session, rn.newest(), rn, rn.heldMsgs()...)
	delete(l.runs, rn.id)
	l.done.put(rn.id, true)
}

// newest is the stream sequence of rn's newest event.
func (rn *run) newest() uint64 {
	var at uint64
	for _, it := range rn.items {
		at = max(at, it.stream)
	}
	return at
}

// watermark moves session's events watermark to stream sequence at, the
// newest event of a commit (rn's, nil for none), unless a run of the
// session that finished at or before at is still held: an event of it is
// still to be (re)delivered. Then it stops just before that run's end.
//
// So the watermark passes the end of a finished run only once the run is
// committed, whatever ran beside it: a turn waits for it to pass the end
// of its session's newest finished run, and so finds every finished run
// on the tape (read-your-writes, internal/worker). The lane sees a
// session's events in stream order, so every run that finished before at
// is committed or held here. What a held run kept the watermark from
// (l.behind) is taken by the session's next watermark write, so that
// committing the held run moves it past every run committed meanwhile.
func (l *lane) watermark(session string, at uint64, rn *run) (tape.AppendOption, uint64) {
	at = max(at, l.behind[session])
	want := at
	for _, other := range l.runs {
		if other != rn && other.session == session && other.end != 0 && other.end <= at {
			at = other.end - 1
		}
	}
	if at < want {
		if l.behind == nil {
			l.behind = map[string]uint64{}
		}
		l.behind[session] = want
	}
	return tape.WithWatermark(taperec.WatermarkEvents, at), at
}

// appendAt appends entries to session's tape (with opts) and moves its
// events watermark to at, the newest event of rn's commit (see
// [lane.watermark]).
func (l *lane) appendAt(ctx context.Context, session string, entries []tape.Entry, at uint64, rn *run, opts ...tape.AppendOption) error {
	wm, w := l.watermark(session, at, rn)
	if _, err := l.r.store.Append(ctx, session, entries, append(opts, wm)...); err != nil {
		return err
	}
	if w >= l.behind[session] {
		delete(l.behind, session)
	}
	return nil
}

// complete reports whether the run finished and every event up to its
// RunFinished arrived: the bridge numbers a run's events 1, 2, 3, … so a
// gap means an event is still to be (re)delivered, and committing then
// would leave half a run on the tape.
func (rn *run) complete() bool {
	if rn.finished == 0 {
		return false
	}
	have := make(map[int64]bool, len(rn.items))
	for _, it := range rn.items {
		have[it.seq] = true
	}
	for s := int64(1); s <= rn.finished; s++ {
		if !have[s] {
			return false
		}
	}
	return true
}

// handBack returns every held, uncommitted event to the stream at once
// (on shutdown), so the next recorder gets them without waiting for the
// ack wait to expire.
func (l *lane) handBack() {
	for _, rn := range l.runs {
		msgs := rn.heldMsgs()
		for _, m := range msgs {
			_ = m.Nak()
		}
		l.r.log.Debug("recorder.handed_back", "run", rn.id, "events", len(msgs))
	}
}

// another takes another delivery of an event the run holds: a
// redelivery of the same stored message replaces the held handle (acking
// either acknowledges it); a copy stored twice (outside the dedupe
// window) or dead-lettered is held too, with no entries, so that the
// run's commit acknowledges it and moves the session's events watermark
// past it (the newest copy of a run's end is what the session's next
// turn waits for).
func (rn *run) another(c item) {
	for i := range rn.items {
		if rn.items[i].stream == c.stream {
			rn.items[i].msg = c.msg
			return
		}
	}
	rn.items = append(rn.items, c)
}

// supersede records, as interrupted, every other open run that answers the
// same inbound envelope from an earlier delivery: its worker died (or lost
// NATS) and the envelope was redelivered. When the other run is the newer
// one — rn's events come late, redelivered after a recorder or NATS
// failure — rn is the stale run and is interrupted instead, and supersede
// returns true. A run whose envelope another run already committed is
// stale too (known from this lane's memory, or read from the tape index
// for redeliveries, where a restarted recorder may not remember).
func (l *lane) supersede(ctx context.Context, rn *run, late bool) (stale bool) {
	if rn.delivery > 1 {
		l.dropOrphans(ctx, rn)
	}
	if rn.envelope == "" {
		return false
	}
	for id, other := range l.runs {
		if id == rn.id || other.envelope != rn.envelope {
			continue
		}
		if newer(other, rn) {
			l.interrupt(ctx, rn, "redelivered", supersededBy(other.id))
			return true
		}
		l.interrupt(ctx, other, "redelivered", supersededBy(rn.id))
		delete(l.runs, id)
	}
	// A run that resumes the committed run of its envelope replays it (its
	// worker died before acknowledging the turn): commitWith skips it as a
	// rerun, without recording it as interrupted.
	if first, ok := l.answered.get(rn.envelope); ok && first != rn.id && first != rn.resumes {
		l.interrupt(ctx, rn, "superseded", supersededBy(first))
		return true
	}
	if late || rn.delivery > 1 {
		if first, _, done, _ := l.envelopeCommitted(ctx, rn); done && first != rn.resumes {
			// rn itself on the tape: its events come again (interrupt
			// takes them as duplicates), else another run answered.
			l.interrupt(ctx, rn, "superseded", supersededBy(first))
			return true
		}
	}
	return false
}

// dropOrphans acknowledges, without recording them, the held runs of rn's
// session that recorded nothing but the bootstrap handoff before rn's
// run.started: a turn's run hands off session/start (a new session's
// first event) just before its run.started, so such a run's worker died
// in between, and rn — the turn delivered again, in a session that runs
// one turn at a time — hands off again itself. Held, the orphan would
// wait out IdleRun and then leave a run.interrupted for a run that never
// started.
func (l *lane) dropOrphans(ctx context.Context, rn *run) {
	at := rn.items[len(rn.items)-1].stream // rn's run.started
	for id, other := range l.runs {
		if id == rn.id || other.session != rn.session || !other.onlyBootstrap(at) {
			continue
		}
		l.forget(ctx, other)
		l.r.log.Info("recorder.orphan_dropped", "run", id, "session", other.session, "events", len(other.items), "rerun", rn.id)
	}
}

// onlyBootstrap reports whether the run holds only bootstrap handoffs
// stored before stream sequence at.
func (rn *run) onlyBootstrap(at uint64) bool {
	for _, it := range rn.items {
		p, ok := it.payload.(*events.TapeEventData)
		if !ok || p.Name != taperec.EventHandoff || p.Data["name"] != tape.BootstrapAnchor || it.stream >= at {
			return false
		}
	}
	return len(rn.items) > 0
}

// resumed drops run id, which rn resumes: rn opens with a copy of id's
// events (docs/durable.md), so id is recorded through rn and not on its
// own — not as interrupted either. Its held events are acknowledged and
// later ones are taken as duplicates.
func (l *lane) resumed(ctx context.Context, rn *run, id string) {
	if other := l.runs[id]; other != nil {
		l.forget(ctx, other)
	}
	l.done.put(id, true) // also when the lane held nothing of it
	l.r.log.Info("recorder.run_resumed", "run", rn.id, "resumes", id, "session", rn.session)
}

// newer reports whether run a answers a later delivery than run b (run
// ids, time-ordered, break ties).
func newer(a, b *run) bool {
	if a.delivery != b.delivery {
		return a.delivery > b.delivery
	}
	return a.id > b.id
}

// sweep keeps held events alive and interrupts idle runs.
func (l *lane) sweep(ctx context.Context) {
	for id, rn := range l.runs {
		if !rn.retry && time.Since(rn.last) > l.r.cfg.IdleRun {
			l.interrupt(ctx, rn, "timeout", nil)
			delete(l.runs, id)
			continue
		}
		for _, m := range rn.heldMsgs() {
			_ = m.InProgress()
		}
	}
}

// interrupt drops a run's buffered entries and records only that it was
// interrupted (for reason, with detail in the marker's data), so no
// partial turn enters later context.
func (l *lane) interrupt(ctx context.Context, rn *run, reason string, detail map[string]any) {
	if l.committed(ctx, rn) {
		l.forget(ctx, rn)
		return
	}
	data := map[string]any{"run_id": rn.id, "reason": reason, "events": len(rn.items)}
	maps.Copy(data, detail)
	e := tape.Event("run.interrupted", data, map[string]any{"run_id": rn.id, "context": false})
	msgs := rn.heldMsgs() // before the marker replaces the items holding them
	rn.items = []item{{stream: rn.newest(), batch: taperec.Batch{Entries: []tape.Entry{e}}, msg: nil}}
	rn.interrupted = true
	l.r.log.Warn("recorder.run_interrupted", "run", rn.id, "session", rn.session, "reason", reason)
	if l.commitWith(ctx, rn, msgs) != nil {
		nak(msgs)
	}
}

// supersededBy is the detail of a run interrupted because run id answers
// its envelope.
func supersededBy(id string) map[string]any { return map[string]any{"superseded_by": id} }

// committed reports whether the tape already holds the run (its events
// are late duplicates seen by a recorder that restarted since).
func (l *lane) committed(ctx context.Context, rn *run) bool {
	ix, err := l.r.store.Index(ctx, rn.session)
	return err == nil && rn.on(ix)
}

// on reports whether tape index ix holds rn's commit (among its recent
// commits), whatever envelope it claimed.
func (rn *run) on(ix tape.Index) bool {
	return slices.ContainsFunc(ix.Commits, func(c tape.CommitRef) bool {
		return c.ID == rn.id || strings.HasPrefix(c.ID, rn.id+"@")
	})
}

func (rn *run) heldMsgs() []jetstream.Msg {
	var out []jetstream.Msg
	for _, it := range rn.items {
		if it.msg != nil {
			out = append(out, it.msg)
		}
	}
	return out
}

func (l *lane) commit(ctx context.Context, rn *run) error {
	return l.commitWith(ctx, rn, rn.heldMsgs())
}

// commitWith appends the run's entries to its tape in one idempotent batch
// (commit id = run id) with the watermarks, then acknowledges msgs. It
// returns the error of a commit that may succeed when tried again; msgs
// are then the caller's to retry or hand back.
func (l *lane) commitWith(ctx context.Context, rn *run, msgs []jetstream.Msg) error {
	slices.SortStableFunc(rn.items, func(a, b item) int { return int(a.seq - b.seq) })
	var entries []tape.Entry
	var reset, archive bool
	for _, it := range rn.items {
		if it.batch.Reset {
			entries, reset = nil, true
			archive = archive || it.batch.Archive
		}
		entries = append(entries, it.batch.Entries...)
	}
	stream := rn.newest()
	ctx, span := telemetry.StartCommit(ctx, rn.id, rn.session, len(entries), traceHeaders(rn.items, msgs))
	defer span.End()
	other, ix, dup, err := l.envelopeCommitted(ctx, rn)
	if err != nil {
		return err
	}
	if dup {
		return l.skipRerun(ctx, rn, other, stream, msgs)
	}
	opts := []tape.AppendOption{tape.WithCommitID(rn.commitID())}
	if ix != nil && !archive {
		opts = append(opts, tape.WithIndex(*ix)) // archiving changes the tape first
	}
	// A redelivered commit, whose tape was archived and reset already, is
	// a replay (skipRerun above): it archives nothing again.
	loc, err := l.archive(ctx, rn.session, archive)
	if loc != "" {
		markArchived(entries, loc)
	}
	if err == nil {
		// Before the append moves the watermarks: a turn that waited for
		// them reads these switches (a failed append is retried and
		// saves them again).
		err = l.saveSwitches(ctx, rn.session, entries, reset)
	}
	if err == nil {
		if reset {
			opts = append(opts, tape.WithReset())
		}
		err = l.appendAt(ctx, rn.session, entries, stream, rn, opts...)
	}
	if err != nil {
		telemetry.Fail(span, err)
		if errors.Is(err, nats.ErrMaxPayload) && !rn.interrupted {
			// The server takes no message this large (its max_payload
			// was lowered after the events were stored, or an event was
			// published without leaving events.EntryReserve of it):
			// retried, the commit would fail forever and hold the
			// session's watermark, and so every later turn of the
			// session, with it. The run is recorded as interrupted; its
			// events stay in the events stream.
			l.r.log.Error("recorder.run_too_large", "run", rn.id, "session", rn.session, "err", err)
			l.interrupt(ctx, rn, "payload_too_large", map[string]any{"error": err.Error()})
			return nil
		}
		l.r.log.Error("recorder.commit_failed", "run", rn.id, "session", rn.session, "err", err)
		return err
	}
	for _, m := range msgs {
		_ = m.Ack()
	}
	l.done.put(rn.id, true)
	if rn.envelope != "" && !rn.interrupted && rn.answers {
		l.answered.put(rn.envelope, rn.id)
	}
	return nil
}

// archive copies the tape before a reset and returns where to.
func (l *lane) archive(ctx context.Context, session string, archive bool) (string, error) {
	if !archive {
		return "", nil
	}
	all, err := l.r.store.Fetch(ctx, session, tape.All())
	if err != nil || len(all) == 0 {
		return "", err
	}
	return l.r.store.Archive(ctx, session, all)
}

// markArchived records the archive location in the state of the
// tape.BootstrapAnchor handoff that follows a reset (Bub's reset(archive=True)).
func markArchived(entries []tape.Entry, loc string) {
	for _, e := range entries {
		if name, ok := e.AnchorName(); ok && name == tape.BootstrapAnchor {
			if st, ok := e.Payload["state"].(map[string]any); ok {
				st["archived"] = loc
			}
		}
		if e.Kind == tape.KindEvent && e.Payload["name"] == taperec.EventHandoff {
			if data, ok := e.Payload["data"].(map[string]any); ok {
				if st, ok := data["state"].(map[string]any); ok {
					st["archived"] = loc
				}
			}
		}
	}
}

// saveSwitches records the latest switches among a committed run's
// entries (tape.Switches: Bub's load_state reads them from the tape),
// merged over the saved ones, or, when the run reset the tape, only those
// after the reset (none deletes the key). The tape's index carries them
// too (tape.Index.Switches), which is where workers read them; the state
// bucket answers for tapes whose index was written before it did.
func (l *lane) saveSwitches(ctx context.Context, session string, entries []tape.Entry, reset bool) error {
	var sw tape.Switches
	changed := false
	for _, e := range entries {
		if sw.Apply(e) {
			changed = true
		}
	}
	if l.r.state == nil || !changed && !reset {
		return nil
	}
	key := l.r.names.SwitchesKey(session)
	if !changed {
		// The reset emptied the tape, and with it the switches (Bub reads
		// them from the tape): later turns run the default model again.
		if err := l.r.state.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		return nil
	}
	if cur, err := l.r.state.Get(ctx, key); err == nil && !reset {
		var old tape.Switches
		if json.Unmarshal(cur.Value(), &old) == nil {
			if sw.Model == "" {
				sw.Model = old.Model
			}
			if sw.ReasoningEffort == "" {
				sw.ReasoningEffort = old.ReasoningEffort
			}
		}
	}
	b, _ := json.Marshal(sw)
	_, err := l.r.state.Put(ctx, key, b)
	return err
}

// reject dead-letters msg; when it cannot, msg stays unacknowledged and
// comes again.
func (l *lane) reject(ctx context.Context, msg jetstream.Msg, reason string, err error) {
	if derr := l.r.dlq.Reject(ctx, msg, reason, err); derr != nil {
		l.r.log.Error("recorder.dlq_failed", "err", derr)
	}
}

// commitID is the tape commit id of a run: its run id, plus "@<envelope
// id>" for a run that answered an inbound envelope (finished well), so
// that a later run of the same envelope is recognised as redundant (see
// [lane.envelopeCommitted]). A failed run does not claim its envelope: the
// retry that succeeds is recorded too.
func (rn *run) commitID() string {
	if rn.envelope == "" || rn.interrupted || !rn.answers {
		return rn.id
	}
	return rn.id + "@" + rn.envelope
}

// envelopeCommitted reports whether the tape already holds rn's commit
// (among its recent commits), and returns rn's id then: a recorder that
// lost its acknowledgements (it crashed) gets the run again, or an event
// of no run was stored twice. A store answers such a commit with what it
// stored the first time and moves no watermark, which must still pass
// the newer copies. It also reports, with that run's id, whether another
// finished run of the same inbound envelope is on the tape: the envelope
// was redelivered after its first run finished but before the worker
// could acknowledge it (a worker or NATS crash), and ran again. It
// returns the index it read (nil when it read none: rn only records its
// interruption), for the commit to start from.
func (l *lane) envelopeCommitted(ctx context.Context, rn *run) (string, *tape.Index, bool, error) {
	if rn.interrupted {
		return "", nil, false, nil
	}
	ix, err := l.r.store.Index(ctx, rn.session)
	if err != nil {
		return "", nil, false, err
	}
	if rn.on(ix) {
		return rn.id, &ix, true, nil
	}
	if rn.envelope == "" {
		return "", &ix, false, nil
	}
	for _, c := range ix.Commits {
		runID, env, ok := strings.Cut(c.ID, "@")
		if ok && env == rn.envelope && runID != rn.id {
			return runID, &ix, true, nil
		}
	}
	return "", &ix, false, nil
}

// skipRerun acknowledges the events of a run the tape holds already (first
// is rn's id) or of a second finished run of an envelope without
// recording it again (a redelivered envelope never yields a duplicate
// turn on the tape); the watermarks still move.
func (l *lane) skipRerun(ctx context.Context, rn *run, first string, stream uint64, msgs []jetstream.Msg) error {
	if err := l.acknowledge(ctx, rn.session, stream, rn, msgs); err != nil {
		l.r.log.Error("recorder.commit_failed", "run", rn.id, "session", rn.session, "err", err)
		return err
	}
	if first == rn.id {
		l.r.log.Info("recorder.commit_replayed", "run", rn.id, "session", rn.session)
	} else {
		l.r.log.Warn("recorder.rerun_skipped", "run", rn.id, "first_run", first, "envelope", rn.envelope, "session", rn.session)
	}
	l.done.put(rn.id, true)
	return nil
}
