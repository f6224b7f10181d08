package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// Options configure a [Replayer].
type Options struct {
	// Plugins are registered after the builtin plugin, in order (the last
	// has the highest priority), as in a worker.
	Plugins []hooks.Plugin
	// Models answers the model calls; nil answers each step's call with
	// what the recording's step holds (--live-model sets the configured
	// router).
	Models agent.Models
	// Workspace is the turn state's workspace and where the skills block
	// looks for skills.
	Workspace string
	// MaxSteps bounds a replayed run's steps (0 = unlimited).
	MaxSteps int
	Log      *slog.Logger
}

// Replayer re-runs recorded turns through the agent loop and the hooks of
// this build. Tools never run: a call is answered with the result the
// recording holds for the same call of the same step, and a call the
// recording has no result for is a divergence. Start it with [New]; it is
// for one session at a time.
type Replayer struct {
	o      Options
	reg    *hooks.Registry[tape.Store, tape.Context]
	tools  *tools.Registry
	shells *toolkit.Shells
	skills *skills.Catalog
	tc     tape.Context
}

// New registers the builtin plugin and o.Plugins, starts them and calls
// build_tape_context, as a worker does at startup.
func New(ctx context.Context, o Options) (*Replayer, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &Replayer{o: o, tools: &tools.Registry{}}
	var err error
	if r.shells, err = toolkit.NewShells(); err != nil {
		return nil, err
	}
	r.skills = skills.New(skills.Options{Log: o.Log})
	if err := toolkit.Register(r.tools, toolkit.Options{Shells: r.shells, Skills: r.skills}); err != nil {
		return nil, errors.Join(err, r.shells.Close())
	}
	r.tools.Freeze()
	if r.reg, _, err = builtin.NewRegistry(builtin.Options{Tools: r.tools}, o.Plugins, hooks.WithLogger(o.Log), hooks.WithDecisionObserver(onDecision)); err != nil {
		return nil, errors.Join(err, r.shells.Close())
	}
	if err := r.reg.Start(ctx); err != nil {
		return nil, errors.Join(err, r.shells.Close())
	}
	tc, ok, err := r.reg.Startup().TapeContext(ctx, hooks.BuildTapeContextInput{})
	if err != nil {
		return nil, errors.Join(err, r.Close(ctx))
	}
	if ok {
		r.tc = tc
	}
	return r, nil
}

// Close stops the plugins.
func (r *Replayer) Close(ctx context.Context) error {
	return errors.Join(r.reg.Close(ctx), r.shells.Close())
}

// Replay re-runs turn t of session: the run starts from the recorded
// context (the tape before the run), gets the recorded prompt, model and
// allowed tools and skills, and its events are mapped to tape entries by
// the recorder's mapping ([taperec.Map]), so that both sides render alike
// ([Lines]).
func (r *Replayer) Replay(ctx context.Context, session string, t Turn) Result {
	res := Result{RunID: t.RunID, Recorded: Lines(t.Entries)}
	recorded, err := steps(t.Entries)
	if err != nil {
		res.Err = err
		return res
	}
	state := bub.NewState(map[string]any{bub.StateSessionID: session, bub.StateWorkspace: r.o.Workspace})
	if t.AllowedSkills != nil {
		state.Set(bub.StateAllowedSkills, t.AllowedSkills)
	}
	tr := &turnRun{
		meta:     events.Meta{State: state, RunID: t.RunID, SessionID: session},
		bus:      &events.Bus{},
		store:    tape.NewMemoryStore(),
		session:  session,
		recorded: recorded,
	}
	if len(t.Context) > 0 {
		if _, err := tr.store.Append(ctx, session, t.Context); err != nil {
			res.Err = err
			return res
		}
	}
	tr.bus.OnEmitted(tr.record)
	events.On(tr.bus, tr.stepStarted)
	events.On(tr.bus, tr.llmFinished)
	agent.Plugins(tr.bus, r.reg, nil)
	events.On(tr.bus, tr.answerTool) // after the hooks: a call they stopped is theirs
	models := r.o.Models
	if models == nil {
		models = recordedModels{tr}
	}
	system := func(ctx context.Context, prompt string, state *bub.State) (string, error) {
		return r.reg.SystemPrompt(ctx, hooks.SystemPromptInput{Prompt: prompt, State: state})
	}
	tc := r.tc
	tc.State = state
	tr.tape = tape.New(tr.store, session, tc)
	a := agent.New(models, r.tools, agent.Settings{Model: t.Model, MaxSteps: r.o.MaxSteps, Skills: r.skills}, system, r.o.Log)
	_, runErr := a.Run(context.WithValue(ctx, runKey{}, tr), agent.Run{
		RunID:        t.RunID,
		SessionID:    session,
		Prompt:       t.Prompt,
		State:        state,
		Model:        t.Model,
		Tape:         tr,
		Bus:          tr.bus,
		AllowedTools: t.AllowedTools,
	})
	replayed, err := tr.store.Fetch(ctx, session, tape.All())
	tr.mu.Lock()
	defer tr.mu.Unlock()
	res.Divergences = tr.divergences
	switch {
	case err != nil || tr.err != nil:
		res.Err = errors.Join(err, tr.err)
	case ctx.Err() != nil:
		res.Err = errors.Join(ctx.Err(), runErr)
	}
	if len(replayed) >= len(t.Context) { // else the run reset its tape: all of it is the run's
		replayed = replayed[len(t.Context):]
	}
	res.Replayed = Lines(replayed)
	return res
}

// runKey carries the turn's run in its context, for the decision observer
// (the registry calls it with ctx only).
type runKey struct{}

// onDecision emits a decision of a chained hook as the hook.decision
// event a worker publishes for it.
func onDecision(ctx context.Context, rec hooks.DecisionRecord) {
	tr, _ := ctx.Value(runKey{}).(*turnRun)
	if tr == nil {
		return
	}
	ev := agent.DecisionEvent(rec)
	ev.Meta = tr.meta
	if _, err := events.Emit(ctx, tr.bus, ev); err != nil {
		tr.fail(err)
	}
}

// turnRun is one replayed run: its bus, its tape (the recorded context
// plus what the run records, in memory) and what it answers from.
type turnRun struct {
	meta     events.Meta
	bus      *events.Bus
	store    *tape.MemoryStore
	tape     tape.Tape
	session  string
	recorded map[int]*step
	step     atomic.Int64 // the step running

	mu          sync.Mutex
	current     []llm.ToolCall // the tool calls the running step's model call answered
	divergences []string
	err         error // the first failure to record an event
}

var _ agent.Tape = (*turnRun)(nil)

func (tr *turnRun) fail(err error) {
	tr.mu.Lock()
	tr.err = errors.Join(tr.err, err)
	tr.mu.Unlock()
}

func (tr *turnRun) diverged(format string, args ...any) string {
	msg := fmt.Sprintf("step %d: ", tr.step.Load()) + fmt.Sprintf(format, args...)
	tr.mu.Lock()
	tr.divergences = append(tr.divergences, msg)
	tr.mu.Unlock()
	return msg
}

// record is the run's TapeRecorder: every event, as the handlers left
// it, becomes the entries the recorder writes for it.
func (tr *turnRun) record(ctx context.Context, ev events.Event) {
	b, err := taperec.MapEvent(ev, tr.meta.RunID, time.Now().UTC())
	tr.mu.Lock() // one batch at a time: the calls of a step run concurrently
	defer tr.mu.Unlock()
	if err == nil {
		err = b.Apply(ctx, tr.store, tr.session)
	}
	tr.err = errors.Join(tr.err, err)
}

func (tr *turnRun) stepStarted(_ context.Context, e *events.StepStarted) error {
	tr.step.Store(int64(e.Step))
	return nil
}

func (tr *turnRun) llmFinished(_ context.Context, e *events.LLMCallFinished) error {
	tr.mu.Lock()
	tr.current = e.Result.ToolCalls
	tr.mu.Unlock()
	return nil
}

// answerTool answers a call the hooks let through with the result the
// recording holds for the same position in the same step, when the
// recording called the same tool there; any other call is denied and
// reported as a divergence (replay runs no tool).
func (tr *turnRun) answerTool(_ context.Context, e *events.ToolCallStarted) error {
	tr.mu.Lock()
	i, name := -1, ""
	for n, c := range tr.current {
		if c.ID == e.Call.CallID {
			i, name = n, c.Function.Name
		}
	}
	tr.mu.Unlock()
	rec := tr.recorded[int(tr.step.Load())]
	switch {
	case i < 0 || rec == nil || i >= len(rec.calls):
		e.Decision = tools.Deny(tr.diverged("this build called %s (call %d), which the recording did not call; replay runs no tool", e.Call.Tool, i+1))
	case rec.calls[i].Function.Name != name:
		e.Decision = tools.Deny(tr.diverged("this build called %s where the recording called %s (call %d); replay runs no tool", name, rec.calls[i].Function.Name, i+1))
	case i >= len(rec.results):
		e.Decision = tools.Deny(tr.diverged("the recording has no result for %s (call %d)", name, i+1))
	default:
		e.Decision = tools.Replace(rec.results[i])
	}
	return nil
}

// ReadMessages reads the model context: the recorded history and what
// the run recorded so far.
func (tr *turnRun) ReadMessages(ctx context.Context) ([]llm.Message, error) {
	return tr.tape.ReadMessages(ctx)
}

// EnsureBootstrapAnchor hands off tape.BootstrapAnchor when the tape has
// no anchor, as a worker's run does.
func (tr *turnRun) EnsureBootstrapAnchor(ctx context.Context) error {
	ix, err := tr.store.Index(ctx, tr.session)
	if err != nil || ix.Anchors > 0 {
		return err
	}
	return tr.Handoff(ctx, tape.BootstrapAnchor, tape.BootstrapState())
}

// Handoff records an anchor and a handoff event (as events, like a
// worker's run).
func (tr *turnRun) Handoff(ctx context.Context, name string, state map[string]any) error {
	if state == nil {
		state = map[string]any{}
	}
	_, err := events.Emit(ctx, tr.bus, &events.TapeEventRecorded{Meta: tr.meta, Name: taperec.EventHandoff, Data: map[string]any{"name": name, "state": state}})
	return err
}

// recordedModels answers each step's model call with what the recording's
// step holds.
type recordedModels struct{ tr *turnRun }

func (m recordedModels) Complete(context.Context, llm.Call, func(llm.Delta)) (llm.Response, error) {
	n := m.tr.step.Load()
	s := m.tr.recorded[int(n)]
	if s == nil {
		return llm.Response{}, bub.Errorf(bub.KindInvalidInput, "%s", m.tr.diverged("this build made a model call the recording does not have"))
	}
	if s.err != nil {
		return llm.Response{}, s.err
	}
	return llm.Response{Text: s.text, ToolCalls: s.calls, Usage: s.usage}, nil
}
