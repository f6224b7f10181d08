package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
	"github.com/bubbus/bub/pkg/tools"
)

// RunAgent implements builtin.Runner: it runs the agent for a turn's model
// stage (see [Runtime.prepare]). The run records the delivery it answers
// (in.Inbound) and drains the turn's steering inbox.
func (rt *Runtime) RunAgent(ctx context.Context, in hooks.RunModelInput) (hooks.Stream, error) {
	t := turnFrom(ctx)
	if t == nil {
		t = &turn{} // a run outside a turn: its events are flushed by nobody
	}
	var (
		steer   agent.Steering
		answers events.Answers
	)
	if inb := in.Inbound; inb != nil {
		answers = events.Answers{EnvelopeID: inb.Message.ID, InboundSeq: inb.StreamSeq, Delivery: inb.Delivery}
		if inb.Steering != nil {
			steer = steeringPrompts{inbox: inb.Steering, reg: rt.reg, session: in.SessionID, state: in.State, log: rt.log}
		}
	}
	run, rtape := rt.prepare(t, in.SessionID, in.State, steer)
	ctx = withRun(ctx, rtape)
	run.Prompt = in.Prompt
	run.Model = in.State.String(bub.StateModel)
	run.Answers = answers
	return runStream(ctx, func(ctx context.Context, emit func(llm.Delta)) error {
		if err := rt.resumeRun(ctx, &run, rtape, in.SessionID, answers); err != nil {
			return err
		}
		subject := rt.o.Names.TokenStream(in.SessionID, run.RunID)
		run.OnDelta = rt.deltas(subject, run.RunID, answers.EnvelopeID, emit)
		ctx, endSpan := rtape.trace.Start(ctx, run.RunID, in.SessionID, run.Model)
		_, err := rt.agent.Run(ctx, run)
		endSpan(err)
		rt.flushDeltas(t)
		return err
	}), nil
}

// prepare sets up one agent run of session: its own event bus, attached to
// the NATS bridge (the turn flushes it before replying) and to a tape fork
// (the local TapeRecorder), with the hooks wired on by the AgentPlugins
// adapter, and tools that can reach the tape and spawn subagents. steer,
// when not nil, is the turn's steering inbox (subagents get none).
func (rt *Runtime) prepare(t *turn, session string, state *bub.State, steer agent.Steering) (agent.Run, *runTape) {
	runID := events.NewID()
	bus := &events.Bus{}
	att := rt.bridge.Attach(bus)
	t.addFlush(att.Flush)
	rtape := &runTape{
		rt:      rt,
		bus:     bus,
		att:     att,
		meta:    events.Meta{State: state, RunID: runID, SessionID: session},
		fork:    tape.NewFork(rt.tapes),
		session: session,
	}
	if ix, ok := t.takeIndex(session); ok {
		rtape.fork.Seed(session, ix)
	}
	tc := rt.tapeContext
	tc.State = state
	rtape.tape = tape.New(rtape.fork, session, tc)
	bus.OnEmitted(rtape.record)
	rtape.trace = telemetry.Instrument(bus, telemetry.AgentOptions{CaptureContent: rt.o.CaptureContent})
	agent.Plugins(bus, rt.reg, steer)
	sp := &spawner{rt: rt, t: t, parent: state}
	return agent.Run{
		RunID:     runID,
		SessionID: session,
		State:     state,
		Tape:      rtape,
		Bus:       bus,
		Approvals: rt.approver(),
		ToolContext: func(tc *tools.Context) {
			tc.Tape = rtape
			tc.Spawner = sp
		},
	}, rtape
}

// spawner runs subagents inside a turn (tools.Spawner).
type spawner struct {
	rt     *Runtime
	t      *turn
	parent *bub.State
}

// Spawn runs a subagent on its own session with a copy of the parent
// state and returns its text, with "[Error: …]" appended when it failed
// (Bub's subagent tool). Sessions under tools.TempSessionPrefix are not
// recorded.
func (s *spawner) Spawn(ctx context.Context, req tools.SpawnRequest) (string, error) {
	state := bub.NewState(s.parent.Snapshot())
	state.Set(bub.StateSessionID, req.Session)
	if req.AllowedSkills != nil {
		state.Set(bub.StateAllowedSkills, req.AllowedSkills)
	}
	run, rtape := s.rt.prepare(s.t, req.Session, state, nil)
	run.Prompt = llm.Text(req.Prompt)
	run.Model = req.Model
	run.AllowedTools = req.AllowedTools
	ctx, endSpan := rtape.trace.Start(withRun(ctx, rtape), run.RunID, req.Session, run.Model)
	out, err := s.rt.agent.Run(ctx, run)
	endSpan(err)
	if err != nil {
		return out.Text + "[Error: " + errorMessage(err) + "]", nil
	}
	return out.Text, nil
}

func errorMessage(err error) string {
	var be *bub.Error
	if errors.As(err, &be) {
		return be.Message
	}
	return err.Error()
}

type runKey struct{}

// withRun records the running run in ctx, so hook decisions made during
// it are reported as events of that run and session. It rides in ctx
// because the hook registry calls its decision observer with only ctx and
// the decision, from inside whichever hook the run's agent dispatched; it
// is optional, request-scoped data: a decision outside a run (in load_state,
// dispatch_outbound) belongs to no run and is not reported as a run event.
func withRun(ctx context.Context, r *runTape) context.Context {
	return context.WithValue(ctx, runKey{}, r)
}

func runFrom(ctx context.Context) *runTape {
	r, _ := ctx.Value(runKey{}).(*runTape)
	return r
}

// resumeRun continues, in run, the interrupted run of a redelivered turn
// when there is one (resume.go): its events open the run and answer it.
// A failure to read them back starts the run afresh; a failure to
// republish them hands the turn back for redelivery (some may be on the
// stream already).
func (rt *Runtime) resumeRun(ctx context.Context, run *agent.Run, rtape *runTape, session string, a events.Answers) error {
	from, err := rt.interruptedRun(ctx, session, a)
	if err != nil {
		rt.log.Warn("worker.resume_failed", "session", session, "envelope", a.EnvelopeID, "err", err)
		return nil
	}
	if from == nil {
		return nil
	}
	if err := rt.resume(ctx, rtape, from, a); err != nil {
		return fmt.Errorf("%w: resuming run %s: %w", ErrRetry, from.run.ID, err)
	}
	run.Resume, run.Prompt = from.run, from.run.Started.Prompt
	rt.log.Info("worker.run_resumed", "run", run.RunID, "resumes", from.run.ID, "session", session, "envelope", a.EnvelopeID, "events", from.run.LastSeq())
	return nil
}

// delta is the JSON of one token delta on bub.stream.<session>.<run>.
// Turn, Step, Kind and Offset identify its text across the attempts of a
// turn (docs/durable.md, "Streaming").
type delta struct {
	RunID  string `json:"run_id"`
	Seq    int    `json:"seq"`
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	Turn   string `json:"turn,omitempty"`
	Step   int    `json:"step"`
	Offset int    `json:"offset"`
}

// deltas returns the run's delta callback: each delta goes to the turn's
// stream (emit) and, unless it was replayed from a resumed run's
// recording (its attempt published it), to subject on core NATS,
// numbered, with its byte offset in the text of its step and kind.
func (rt *Runtime) deltas(subject, runID, turn string, emit func(llm.Delta)) func(agent.Delta) {
	seq := 0
	offsets := map[[2]any]int{}
	return func(d agent.Delta) {
		if !d.Replayed {
			seq++
			key := [2]any{d.Step, d.Kind}
			rt.publishDelta(subject, delta{RunID: runID, Seq: seq, Kind: d.Kind, Text: d.Text, Turn: turn, Step: d.Step, Offset: offsets[key]})
			offsets[key] += len(d.Text)
		}
		emit(d.Delta)
	}
}

// publishDelta sends a token delta on core NATS: ephemeral, never needed
// for correctness, so failures are only logged.
func (rt *Runtime) publishDelta(subject string, d delta) {
	b, _ := json.Marshal(d)
	if err := cmp.Or(rt.o.Deltas, rt.o.NC).Publish(subject, b); err != nil {
		rt.log.Debug("worker.delta_dropped", "err", err)
	}
}

// flushDeltas makes the turn's flush, which comes before its reply, wait
// until the server has taken every delta the run published on its own
// connection (RuntimeOptions.Deltas), so none reaches a subscriber after
// the reply. The round trip starts when the run ends and overlaps the
// turn's other acknowledgements; a failure is logged, as deltas are.
func (rt *Runtime) flushDeltas(t *turn) {
	if rt.o.Deltas == nil {
		return // on NC: the connection keeps them ahead of the reply
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rt.o.Deltas.Flush(); err != nil {
			rt.log.Debug("worker.deltas_not_flushed", "err", err)
		}
	}()
	t.addFlush(func(ctx context.Context) error {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// awaitEarlierTurns waits until the recorder committed every finished run
// of the session (read-your-writes), at most ReadYourWrites; when the
// wait times out the turn proceeds and says so with a tape.stale event (of
// no run: the turn waits before its first stage), as it does when it
// cannot find what to wait for. It returns the tape's index that showed
// the wait over (ok false when it has none): the turn's runs start from it
// ([tape.Fork.Seed]) instead of reading it again.
//
// The index is read beside the run ends, in one round trip: when it shows
// the newest run end committed already (the session's earlier turns were
// recorded before this one came, or there were none) nothing is waited
// for; otherwise the index is read again until its watermark passes that
// end.
//
// A run ends with its run.finished (a command's with command.finished),
// stored before the turn replies. So the newest of the two on the
// session's subjects, read from the events stream's leader (a direct get
// on one server; through the JetStream API with replicas, where a direct
// get may be answered by a lagging follower: see natsx.Topology), is the end
// of the newest finished run, and of every earlier one; the recorder
// moves the tape's events watermark to an event only when every run of
// the session that finished by then is committed (see
// internal/recorder), however the runs overlapped.
func (rt *Runtime) awaitEarlierTurns(ctx context.Context, session string) (tape.Index, bool) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, rt.o.ReadYourWrites)
	defer cancel()
	var (
		ix    tape.Index
		ixErr error
		wg    sync.WaitGroup
	)
	wg.Go(func() { ix, ixErr = rt.tapes.Index(wctx, session) })
	want, err := rt.lastRunEnd(wctx, session)
	wg.Wait()
	if err == nil {
		if ixErr == nil && ix.Watermark(taperec.WatermarkEvents) >= want {
			return ix, true
		}
		if want == 0 {
			return tape.Index{}, false // the fork reads the index itself
		}
		if ix, err = rt.tapes.WaitWatermark(wctx, session, taperec.WatermarkEvents, want); err == nil {
			return ix, true
		}
	}
	have := ix.Watermark(taperec.WatermarkEvents)
	rt.log.Warn("worker.tape_stale", "session", session, "want", want, "have", have, "err", err)
	data := events.TapeStaleData{Tape: session, Watermark: want, Committed: have, WaitedMS: time.Since(start).Milliseconds()}
	if err := rt.publish(ctx, events.TypeTapeStale, session, data); err != nil {
		rt.log.Warn("worker.tape_stale_event_failed", "err", err)
	}
	return tape.Index{}, false
}

// runEnds are the event types that end a recorded run.
var runEnds = [...]string{events.TypeRunFinished, events.TypeCommandFinished}

// lastRunEnd returns the events-stream sequence of the session's newest
// run.finished or command.finished, 0 when there is none. The two reads
// run at once, each riding out a leader election ([jsretry.Read]).
func (rt *Runtime) lastRunEnd(ctx context.Context, session string) (uint64, error) {
	var (
		seqs [len(runEnds)]uint64
		errs [len(runEnds)]error
		wg   sync.WaitGroup
	)
	for i, typ := range runEnds {
		subject := rt.o.Names.Event(session, events.SubjectName(typ))
		wg.Go(func() {
			errs[i] = jsretry.Read(ctx, func(ctx context.Context) error {
				m, err := rt.events.GetLastMsgForSubject(ctx, subject)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					return nil
				}
				if err == nil {
					seqs[i] = m.Sequence
				}
				return err
			})
		})
	}
	wg.Wait()
	return slices.Max(seqs[:]), errors.Join(errs[:]...)
}

// runTape is the agent's view of its session tape during a run: committed
// entries plus the run's own, through a fork. It never writes the store:
// every write is an event (the recorder is the only tape writer), which the
// fork applies locally through the same mapping the recorder uses. Events
// are applied lazily, when the run next reads its tape, so the events
// after its last read cost nothing.
type runTape struct {
	rt      *Runtime
	bus     *events.Bus
	att     *events.Attachment // the bus's bridge attachment
	meta    events.Meta
	fork    *tape.Fork
	tape    tape.Tape
	session string
	trace   *telemetry.Agent // the run's spans

	mu      sync.Mutex
	pending []recorded // emitted, not yet applied to the fork
	err     error      // the first failure to apply an event to the fork
}

// recorded is an emitted event and when it was emitted.
type recorded struct {
	ev events.Event
	at time.Time
}

var (
	_ agent.Tape        = (*runTape)(nil)
	_ tools.Tape        = (*runTape)(nil)
	_ events.TapeWriter = (*runTape)(nil)
)

// record is the local TapeRecorder (an after-dispatch sink, like the
// bridge: it sees each event as the handlers left it); sync applies it.
func (r *runTape) record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	r.pending = append(r.pending, recorded{ev: ev, at: time.Now().UTC()})
	r.mu.Unlock()
}

// sync applies the recorded events to the fork exactly as the recorder
// will apply them to the tape, and returns the first failure to do so.
func (r *runTape) sync(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.pending {
		r.pending[i] = recorded{}
		b, err := taperec.MapEvent(p.ev, r.meta.RunID, p.at)
		if err == nil {
			err = b.Apply(ctx, r.fork, r.session)
		}
		r.err = errors.Join(r.err, err)
	}
	r.pending = r.pending[:0]
	return r.err
}

// ReadMessages reads the model context from the fork.
func (r *runTape) ReadMessages(ctx context.Context) ([]llm.Message, error) {
	if err := r.sync(ctx); err != nil {
		return nil, err
	}
	return r.tape.ReadMessages(ctx)
}

// EnsureBootstrapAnchor hands off tape.BootstrapAnchor when the tape (with the
// run's own entries) has no anchor.
func (r *runTape) EnsureBootstrapAnchor(ctx context.Context) error {
	if err := r.sync(ctx); err != nil {
		return err
	}
	ix, err := r.fork.Index(ctx, r.session)
	if err != nil {
		return err
	}
	if ix.Anchors > 0 {
		return nil
	}
	return r.Handoff(ctx, tape.BootstrapAnchor, tape.BootstrapState())
}

// Handoff records an anchor and a handoff event.
func (r *runTape) Handoff(ctx context.Context, name string, state map[string]any) error {
	if state == nil {
		state = map[string]any{}
	}
	return r.AppendEvent(ctx, taperec.EventHandoff, map[string]any{"name": name, "state": state})
}

// AppendEvent records a named event entry (events.TapeWriter). A handoff
// or reset whose data the recorder would dead-letter (taperec.CheckEvent)
// is refused before it is emitted.
func (r *runTape) AppendEvent(ctx context.Context, name string, data map[string]any) error {
	if err := taperec.CheckEvent(name, data); err != nil {
		return bub.Errorf(bub.KindInvalidInput, "%v", err)
	}
	_, err := events.Emit(ctx, r.bus, &events.TapeEventRecorded{Meta: r.meta, Name: name, Data: data})
	if err != nil {
		return err
	}
	return r.sync(ctx)
}

// runStream adapts a run that reports deltas through a callback into a
// hooks.Stream without a goroutine of its own: the run executes in the
// ranging goroutine and each delta is yielded from the callback. Breaking
// out of the stream cancels the run's context; the run then ends and no
// further delta is yielded (nor after the loop body panicked).
func runStream(ctx context.Context, run func(ctx context.Context, emit func(llm.Delta)) error) hooks.Stream {
	return func(yield func(llm.Delta, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		open := true
		err := run(ctx, func(d llm.Delta) {
			if !open {
				return
			}
			open = false // stays closed if yield panics
			if open = yield(d, nil); !open {
				cancel()
			}
		})
		if err != nil && open {
			yield(llm.Delta{}, err)
		}
	}
}

// Info summarizes the tape as the run sees it.
func (r *runTape) Info(ctx context.Context) (tape.Info, error) {
	if err := r.sync(ctx); err != nil {
		return tape.Info{}, err
	}
	return r.tape.Info(ctx)
}

// Search runs tape.search over the run's view.
func (r *runTape) Search(ctx context.Context, s tape.Search) (tape.SearchResult, error) {
	if err := r.sync(ctx); err != nil {
		return tape.SearchResult{}, err
	}
	return r.tape.Search(ctx, s)
}

// Anchors lists the last anchors of the run's view.
func (r *runTape) Anchors(ctx context.Context, limit int) ([]tape.AnchorSummary, error) {
	if err := r.sync(ctx); err != nil {
		return nil, err
	}
	return r.tape.Anchors(ctx, limit)
}

// Reset records a tape reset; the recorder applies it (and archives) when
// it commits the run, and the run's own view is reset at once.
func (r *runTape) Reset(ctx context.Context, archive bool) (string, error) {
	if err := r.AppendEvent(ctx, taperec.EventReset, map[string]any{"archive": archive}); err != nil {
		return "", err
	}
	if archive {
		return "Archived: " + r.rt.o.Names.TapeArchive(r.session) + " (written when this run is recorded)", nil
	}
	return "ok", nil
}
