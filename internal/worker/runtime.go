package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/replies"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/providers"
	"github.com/bubbus/bub/pkg/pipeline"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/mcptools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// Registry is the hook registry of a worker.
type Registry = hooks.Registry[tape.Store, tape.Context]

// RuntimeOptions configure the turn runtime of a worker.
type RuntimeOptions struct {
	NC *nats.Conn
	// Deltas, when set, is the connection token deltas are published on
	// (else NC), so that a delta never waits at the server behind the
	// JetStream writes NC sent before it. A run flushes it before its
	// turn replies, so every delta still reaches a subscriber before the
	// reply does. The runtime drains it when it closes.
	Deltas *nats.Conn
	JS     jetstream.JetStream
	Names  subjects.Names
	// Source is the CloudEvent source of everything the worker publishes.
	Source string
	// Instance names this worker in its cluster. With State set, it makes
	// background shells reachable from every worker: their owner is
	// recorded in State and bash.output and bash.kill are answered on
	// [subjects.Names.WorkerShells] (empty = shells are local).
	Instance string
	// TapeStore opens the default tape store (JetStream): the builtin
	// plugin's provide_tape_store, called only when no plugin of higher
	// priority provides one. The runtime reads committed tapes from the
	// store the hook resolves.
	TapeStore func(ctx context.Context) (tape.Store, error)
	// Channels returns the builtin channels (the builtin's
	// provide_channels); the runtime asks them for admission only.
	Channels hooks.ChannelsFunc
	// State is the per-session state bucket (switches, shell owners).
	State jetstream.KeyValue
	// Approvals parks the tool calls a before_tool_call hook asks a person
	// about (internal/approvals); nil denies them.
	Approvals agent.Approver
	// Models configures the model router.
	Models llm.Config
	// Workspace is the tools' workspace.
	Workspace string
	// SkillConfig resolves ${config.<dotted.path>} in skill bodies (env
	// over YAML); nil means no config values.
	SkillConfig skills.Lookup
	// Agent holds agent settings; Model and MaxTokens default from Models,
	// and Skills is always the catalog the skill tool reads.
	Agent agent.Settings
	// Plugins are registered after the builtin plugin, in order (so the
	// last one has the highest priority); remote interceptors are plugins.
	Plugins []hooks.Plugin
	// ReadYourWrites bounds the wait for the recorder to commit a
	// session's earlier turns before a turn reads its tape (12s: longer
	// than a stream leader election after a server loss, 4–9s, plus the
	// recorder noticing its new consumer leader, 2s; the wait ends as
	// soon as the commit is in).
	ReadYourWrites time.Duration
	// CaptureContent puts prompts, responses and tool arguments and
	// results on trace spans (BUB_OTEL_CAPTURE_CONTENT).
	CaptureContent bool
	// MCP are the MCP servers whose tools the agent gets (as
	// mcp.<server>_<tool>): started with the runtime, stopped by Close.
	MCP []mcptools.Server
	Log *slog.Logger
}

// Runtime is the worker's [Processor]: Bub's hook-driven turn pipeline with
// the agent loop, publishing events, token deltas and replies to NATS.
type Runtime struct {
	o      RuntimeOptions
	reg    *Registry
	fw     *pipeline.Pipeline
	agent  *agent.Agent
	bridge *events.Bridge
	shells *toolkit.Shells
	mcp    *mcptools.Manager
	router *shellRouter // nil without Instance or State
	log    *slog.Logger
	// remote names the plugins that are remote interceptors (for the
	// Remote field of hook decision events); read-only after NewRuntime.
	remote map[string]bool
	// scope is the runtime scope: tapes is the store provide_tape_store
	// resolved for it, read by every turn.
	scope *hooks.Scope[tape.Store]
	tapes tape.Store
	// events is the events stream: a turn finds the end of its session's
	// newest finished run there (read-your-writes), a redelivered turn the
	// run it resumes.
	events jetstream.Stream
	// tapeContext is what build_tape_context answered at startup.
	tapeContext tape.Context
	// quitter stops a session's other turns for the quit tool (set by
	// SetQuitter before the worker runs).
	quitter Quitter
}

// NewRuntime assembles the hook registry (builtin first, then o.Plugins),
// the agent, its tools (the MCP servers' among them) and the NATS bridge,
// and starts the plugins and the MCP servers.
func NewRuntime(ctx context.Context, o RuntimeOptions) (_ *Runtime, err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ReadYourWrites == 0 {
		o.ReadYourWrites = 12 * time.Second
	}
	rt := &Runtime{o: o, log: o.Log}
	router, err := providers.NewRouter(o.Models, llm.WithLogger(o.Log))
	if err != nil {
		return nil, err
	}
	cfg := router.Config()
	if o.Agent.Model == "" {
		o.Agent.Model = cfg.Model
	}
	if o.Agent.MaxTokens == 0 {
		o.Agent.MaxTokens = cfg.MaxTokens
	}
	var shellOpts []toolkit.ShellsOption
	if o.Instance != "" && o.State != nil {
		rt.router = &shellRouter{nc: o.NC, kv: o.State, names: o.Names, instance: o.Instance, log: o.Log}
		shellOpts = append(shellOpts, toolkit.WithRouter(rt.router))
	}
	if rt.shells, err = toolkit.NewShells(shellOpts...); err != nil {
		return nil, err
	}
	catalog := skills.New(skills.Options{Config: o.SkillConfig, Log: o.Log})
	o.Agent.Skills = catalog
	reg := &tools.Registry{}
	runtimeOptions := func(ctx context.Context, session string) (hooks.RuntimeOptions, error) {
		return rt.reg.RuntimeOptions(ctx, hooks.RuntimeOptionsInput{SessionID: session, Workspace: o.Workspace})
	}
	if err := toolkit.Register(reg, toolkit.Options{Shells: rt.shells, RuntimeOptions: runtimeOptions, Skills: catalog, Quit: rt.quit}); err != nil {
		return nil, err
	}
	if rt.mcp, err = startMCP(ctx, reg, o.MCP, o.Log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // stop the servers (again, if rt.Close did: that is a no-op)
			err = errors.Join(err, rt.mcp.Close(context.WithoutCancel(ctx)))
		}
	}()
	reg.Freeze()
	rt.agent = agent.New(router, reg, o.Agent, rt.systemPrompt, o.Log)
	if rt.bridge, err = events.NewBridge(o.JS, o.Names, o.Source, events.WithTraceContext(telemetry.TraceContext)); err != nil {
		return nil, err
	}
	if err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		rt.events, err = o.JS.Stream(ctx, o.Names.EventsStream())
		return err
	}); err != nil {
		return nil, fmt.Errorf("worker: events stream: %w", err)
	}
	var bp *builtin.Plugin
	rt.reg, bp, err = builtin.NewRegistry(builtin.Options{Runner: rt, Outbox: rt, Switches: rt, Tools: reg, Startup: builtin.Startup{
		TapeStore: o.TapeStore,
		Channels:  o.Channels,
		Models:    append([]string{cfg.Model}, cfg.FallbackModels...),
	}}, o.Plugins, hooks.WithLogger(o.Log), hooks.WithDecisionObserver(rt.onDecision))
	if err != nil {
		return nil, err
	}
	rt.remote = map[string]bool{}
	for _, p := range o.Plugins {
		if d, ok := hooks.As[hooks.Describer](p); ok && d.Describe().Remote {
			rt.remote[p.Name()] = true
		}
	}
	if err := rt.reg.Start(ctx); err != nil {
		return nil, err
	}
	if err := rt.startup(ctx, bp); err != nil {
		return nil, errors.Join(err, rt.reg.Close(ctx))
	}
	rt.fw = pipeline.New(rt.reg, o.Workspace, o.Log)
	if rt.router != nil {
		rt.router.shells = rt.shells
		if err := rt.router.serve(); err != nil {
			return nil, errors.Join(err, rt.Close(ctx))
		}
	}
	return rt, nil
}

// errNoChannelIntake is what a channel gets when it hands a message to a
// worker: channels receive in a gateway, workers only ask them for
// admission.
var errNoChannelIntake = errors.New("worker: channels do not receive messages in a worker (run them in a gateway)")

// startup calls the startup hooks a worker uses, once: provide_channels
// (so admit_message can delegate to the message's channel) and
// build_tape_context, and opens the runtime scope, whose provide_tape_store
// answer every turn reads.
func (rt *Runtime) startup(ctx context.Context, bp *builtin.Plugin) error {
	st := rt.reg.Startup()
	chs, err := st.Channels(ctx, hooks.ProvideChannelsInput{Handler: func(context.Context, *envelope.Envelope) error { return errNoChannelIntake }})
	if err != nil {
		return err
	}
	bp.SetChannels(chs)
	tc, ok, err := st.TapeContext(ctx, hooks.BuildTapeContextInput{})
	if err != nil {
		return err
	}
	if ok {
		rt.tapeContext = tc
	}
	if rt.scope, err = rt.reg.OpenScope(ctx); err != nil {
		return err
	}
	if rt.tapes = rt.scope.TapeStore(); rt.tapes == nil {
		return errors.Join(errors.New("worker: no plugin provides a tape store (provide_tape_store)"), rt.scope.Close(ctx))
	}
	return nil
}

// Hooks returns the runtime's hook registry (for `bub hooks`).
func (rt *Runtime) Hooks() *Registry { return rt.reg }

// Close stops the plugins, kills background shells and flushes the bridge.
func (rt *Runtime) Close(ctx context.Context) error {
	var routerErr error
	if rt.router != nil {
		routerErr = rt.router.close() // no more routed calls, then the shells go
	}
	var deltasErr error
	if rt.o.Deltas != nil {
		deltasErr = rt.o.Deltas.Drain()
	}
	return errors.Join(routerErr, rt.scope.Close(ctx), rt.reg.Close(ctx), rt.mcp.Close(ctx), rt.shells.Close(), rt.bridge.Close(ctx), deltasErr)
}

// startMCP starts the MCP servers and registers their tools in reg.
func startMCP(ctx context.Context, reg *tools.Registry, servers []mcptools.Server, log *slog.Logger) (*mcptools.Manager, error) {
	m, err := mcptools.New(servers, mcptools.Options{Log: log})
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	if err := m.Register(reg); err != nil {
		return nil, errors.Join(err, m.Close(context.WithoutCancel(ctx)))
	}
	return m, nil
}

// Process runs the turn of one inbound envelope. Before the pipeline's
// first stage it waits (bounded) until the recorder committed the
// session's earlier turns (read-your-writes: load_state reads the switches
// they saved, the agent their tape). Publishing failures wrap ErrRetry so
// the envelope is redelivered; a failed turn was already answered by
// on_error and is not.
func (rt *Runtime) Process(ctx context.Context, in Inbound) (err error) {
	ctx, span := telemetry.StartTurn(ctx, telemetry.Turn{
		Traceparent: in.Traceparent, Tracestate: in.Tracestate,
		Stream: rt.o.Names.InboundStream(), Consumer: rt.o.Names.WorkerConsumer(),
		MessageID: in.Envelope.ID, SessionID: in.Envelope.SessionID, Delivery: in.Delivery,
	})
	defer func() { span.End(ctx, turnStatus(err), err) }()
	t := &turn{envelope: in.Envelope.ID}
	ctx = withTurn(ctx, t)
	conn := watchConn(rt.o.NC)
	session := rt.session(ctx, in)
	if session != "" {
		if ix, ok := rt.awaitEarlierTurns(ctx, session); ok {
			t.index, t.indexOf = ix, session
		}
	}
	if in.Admitted != nil {
		if err := in.Admitted(); err != nil {
			return err
		}
	}
	_, err = rt.fw.ProcessInbound(ctx, pipeline.Turn{
		Inbound:   hooks.Inbound{Message: in.Envelope, StreamSeq: in.StreamSeq, Delivery: in.Delivery, Steering: in.Steering},
		SessionID: session,
	})
	if quitted(ctx) {
		// Stopped by ,quit: the run was recorded as cancelled; no reply
		// (the failure report included) follows "Session tasks stopped.".
		t.takeFailure()
		if ferr := t.flush(context.WithoutCancel(ctx)); ferr != nil {
			rt.log.Warn("worker.quit_flush_failed", "envelope", in.Envelope.ID, "err", ferr)
		}
		rt.log.Info("worker.turn_quit", "envelope", in.Envelope.ID, "session", in.Envelope.SessionID)
		return nil
	}
	if err != nil {
		if err = rt.settleFailure(ctx, conn, t, err); errors.Is(err, ErrRetry) {
			return err
		}
	}
	if ferr := t.flush(ctx); ferr != nil {
		return fmt.Errorf("%w: flushing events: %w", ErrRetry, ferr)
	}
	return err
}

// session returns the session of the turn of in: the one the admission
// gate resolved, else resolve_session's answer (a runtime used without the
// gate), so that the turn can wait for the session's earlier turns before
// its first stage and resolve_session still runs once; it then sees the
// message normalized, as in the pipeline. When resolve_session fails it
// returns "": the pipeline then resolves the session itself and reports
// the failure as the turn's.
func (rt *Runtime) session(ctx context.Context, in Inbound) string {
	if in.Session != "" {
		return in.Session
	}
	in.Envelope.Normalize()
	session, err := rt.reg.ResolveSession(ctx, hooks.ResolveSessionInput{Message: in.Envelope})
	if err != nil {
		return ""
	}
	return session
}

func (rt *Runtime) systemPrompt(ctx context.Context, prompt string, state *bub.State) (string, error) {
	return rt.reg.SystemPrompt(ctx, hooks.SystemPromptInput{Prompt: prompt, State: state})
}

// onDecision publishes every decision of a chained hook that changed or
// stopped a call as a hook.decision event of the current run.
func (rt *Runtime) onDecision(ctx context.Context, rec hooks.DecisionRecord) {
	telemetry.RecordDecision(ctx, rec)
	run := runFrom(ctx)
	if run == nil {
		return
	}
	ev := agent.DecisionEvent(rec)
	ev.Meta = run.meta
	ev.Remote = rt.remote[rec.Plugin]
	if _, err := events.Emit(ctx, run.bus, ev); err != nil {
		rt.log.Warn("worker.decision_event_failed", "err", err)
	}
}

// Send implements builtin.Outbox: it waits until the turn's events are
// acknowledged, then publishes the outbound envelope (deduplicated by its
// deterministic id) and records where it is stored (replies.Record, for
// the turn's done marker).
func (rt *Runtime) Send(ctx context.Context, env *envelope.Envelope) error {
	if holdFailureReply(ctx, env) {
		return nil // sent by Process once the turn's outcome is known
	}
	if quitted(ctx) {
		return nil // a turn stopped by ,quit answers nothing
	}
	return rt.sendNow(ctx, env)
}

// sendNow is Send without the hold-back and quit checks: it flushes the
// turn's events, publishes env and records where it is stored.
func (rt *Runtime) sendNow(ctx context.Context, env *envelope.Envelope) error {
	if t := turnFrom(ctx); t != nil {
		if err := t.flush(ctx); err != nil {
			return retryUnlessTooLarge(fmt.Errorf("flushing events before the reply: %w", err))
		}
	}
	target := env.OutputChannel
	if target == "" {
		target = env.ChannelOrDefault()
	}
	ev, err := events.New(events.TypeEnvelopeOutbound, tracedAttrs(ctx, events.Attrs{ID: env.ID, Source: rt.o.Source, SessionID: env.SessionID}), env)
	if err != nil {
		return err
	}
	msg, err := events.ToMsg(rt.o.Names.Outbound(target, env.SessionID), ev)
	if err != nil {
		return err
	}
	// The outbound's id is its Nats-Msg-Id, so a publish retried through
	// a leader election (BUB_OUTBOUND's leader lost) is stored once; one
	// attempt would hand the whole turn back instead.
	var ack *jetstream.PubAck
	err = jsretry.Read(ctx, func(ctx context.Context) (err error) {
		ack, err = rt.o.JS.PublishMsg(ctx, msg)
		return err
	})
	if err != nil {
		return retryUnlessTooLarge(fmt.Errorf("publishing outbound %s: %w", env.ID, err))
	}
	replies.Record(ctx, replies.Ref{Stream: ack.Stream, Seq: ack.Sequence})
	return nil
}

// publish sends one standalone event of session (of no run) and waits for
// its acknowledgement.
func (rt *Runtime) publish(ctx context.Context, typ, session string, data any) error {
	ev, err := events.New(typ, tracedAttrs(ctx, events.Attrs{Source: rt.o.Source, SessionID: session}), data)
	if err != nil {
		return err
	}
	msg, err := events.ToMsg(rt.o.Names.Event(session, events.SubjectName(typ)), ev)
	if err != nil {
		return err
	}
	_, err = rt.o.JS.PublishMsg(ctx, msg)
	return err
}

// LatestSwitches implements builtin.SwitchReader. A turn reads them after
// it waited (bounded) until the recorder committed the session's earlier
// turns (see [Runtime.Process]): from the tape's index that ended the wait
// (tape.Index.Switches, committed with the entries), without another read.
// An index written before the store kept them sends the turn to the state
// bucket the recorder also maintains, whose switches it saves (or clears,
// on tape.reset) before committing.
func (rt *Runtime) LatestSwitches(ctx context.Context, session string) (tape.Switches, error) {
	if t := turnFrom(ctx); t != nil {
		if sw, ok := t.switches(session); ok {
			return sw, nil
		}
	}
	var sw tape.Switches
	if rt.o.State == nil {
		return sw, nil
	}
	var e jetstream.KeyValueEntry
	err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		e, err = rt.o.State.Get(ctx, rt.o.Names.SwitchesKey(session))
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return sw, nil // none, or cleared by a tape reset
	}
	if err != nil {
		return sw, err
	}
	if err := json.Unmarshal(e.Value(), &sw); err != nil {
		return sw, fmt.Errorf("decoding switches of %s: %w", session, err)
	}
	return sw, nil
}
