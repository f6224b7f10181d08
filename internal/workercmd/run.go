package workercmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/bubbus/bub/internal/admission"
	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// Options configures [Run].
type Options struct {
	Worker    worker.Config
	Topology  natsx.Topology
	Instance  string
	Models    llm.Config
	Workspace string
	Agent     agent.Settings
	// Plugins are registered after the builtin plugin, in order.
	Plugins []hooks.Plugin
	// Interceptors are remote interceptor services, registered after
	// Plugins in order (so the last has the highest priority).
	Interceptors []remote.Config
	// ShutdownGrace bounds the final flush and plugin close (10s).
	ShutdownGrace time.Duration
	// Admission is the builtin admission policy (BUB_ADMISSION, see
	// admission.ParsePolicy); empty = none (admit_message's default).
	Admission string
	// CaptureContent puts prompts, responses and tool data on trace spans
	// (BUB_OTEL_CAPTURE_CONTENT).
	CaptureContent bool
	// Channels returns the builtin channels (see channelset.Builtin); nil
	// means none.
	Channels hooks.ChannelsFunc
	// SkillConfig resolves ${config.…} in skill bodies; nil = none.
	SkillConfig skills.Lookup
	// OnStarted, when set, is called once [Run] has started and
	// consumes inbound envelopes.
	OnStarted func()
	// MCP are the MCP servers each worker starts and offers the tools of
	// (BUB_MCP_SERVERS, see mcptools.ServersFromEnv).
	MCP []mcptools.Server
	// TapeCacheMiB bounds the tape store's cache of committed entries,
	// in MiB of the messages they were decoded from (see
	// tape.WithEntryCache); 0 turns it off.
	TapeCacheMiB int
	// envErr are the numbers from the environment Bind could not take,
	// for Load to report.
	envErr error
}

// NewRuntime builds a worker's turn runtime on conn.
func NewRuntime(ctx context.Context, conn *service.Conn, o Options, log *slog.Logger) (*worker.Runtime, error) {
	if err := natsx.EnsureTopologyLogged(ctx, conn.JS, conn.Names, conn.TopologyOr(o.Topology), log); err != nil {
		return nil, err
	}
	state, err := conn.JS.KeyValue(ctx, conn.Names.StateBucket())
	if err != nil {
		return nil, fmt.Errorf("binding state bucket: %w", err)
	}
	approvalStore, err := approvals.Open(ctx, conn.JS, conn.Names)
	if err != nil {
		return nil, err
	}
	policy, err := admission.ParsePolicy(o.Admission)
	if err != nil {
		return nil, err
	}
	plugins, err := interceptors(ctx, conn, o, log)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		plugins = append([]hooks.Plugin{policy}, plugins...) // lowest priority after the builtin
	}
	deltas, err := conn.Redial(ctx, "deltas")
	if err != nil {
		return nil, fmt.Errorf("opening the token-delta connection: %w", err)
	}
	rt, err := worker.NewRuntime(ctx, worker.RuntimeOptions{
		NC: conn.NC, Deltas: deltas, JS: conn.JS, Names: conn.Names,
		Source:   events.Source("worker", o.Instance),
		Instance: o.Instance,
		TapeStore: func(ctx context.Context) (tape.Store, error) {
			return tape.NewJetStreamStore(ctx, conn.JS, conn.Names, tape.WithoutProvisioning(), tape.WithEntryCache(o.TapeCacheMiB<<20))
		},
		State:     state,
		Approvals: approvalStore,
		Models:    o.Models,
		Workspace: o.Workspace,
		Agent:     o.Agent,
		Plugins:   plugins,
		Channels:  o.Channels,
		Log:       log,

		SkillConfig: o.SkillConfig,

		CaptureContent: o.CaptureContent,
		MCP:            o.MCP,
	})
	if err != nil {
		deltas.Close()
	}
	return rt, err
}

// interceptors returns o.Plugins followed by a started remote plugin per
// o.Interceptors, in order. A remote plugin discovers its hooks when it
// starts and the registry reads them at registration, so it starts here,
// before the runtime registers it (the registry's Start then does nothing
// more).
func interceptors(ctx context.Context, conn *service.Conn, o Options, log *slog.Logger) ([]hooks.Plugin, error) {
	plugins := slices.Clone(o.Plugins)
	for _, cfg := range o.Interceptors {
		p, err := remote.New(conn.NC, conn.Names, cfg, log, remote.WithTraceContext(telemetry.TraceContext), remote.WithCallSpan(telemetry.InterceptorCall))
		if err != nil {
			return nil, err
		}
		if err := p.Start(ctx); err != nil {
			return nil, err
		}
		plugins = append(plugins, p)
	}
	return plugins, nil
}

// Run consumes inbound envelopes on conn until ctx ends, then drains.
func Run(ctx context.Context, conn *service.Conn, o Options, log *slog.Logger) error {
	// Start the remote interceptors here, so that observeWorker sees them.
	plugins, err := interceptors(ctx, conn, o, log)
	if err != nil {
		return err
	}
	o.Plugins, o.Interceptors = plugins, nil
	rt, err := NewRuntime(ctx, conn, o, log)
	if err != nil {
		return err
	}
	gate, err := admission.NewGate(ctx, admission.Options{
		JS: conn.JS, Names: conn.Names,
		Source: events.Source("worker", o.Instance),
		Hooks:  rt.Hooks(), Outbox: rt, Next: rt,
		TTL:   conn.TopologyOr(o.Topology).TurnTTL,
		Owner: o.Instance,
		Log:   log,
	})
	if err != nil {
		return errors.Join(err, rt.Close(ctx))
	}
	defer gate.Close()
	rt.SetQuitter(gate) // ,quit stops the session's other turns on every worker
	w, err := worker.New(o.Worker, conn.JS, conn.Names, gate, log)
	if err != nil {
		return errors.Join(err, rt.Close(ctx))
	}
	conn.ReportStatus(func() any {
		running, concurrency := w.Load()
		return status.WorkerLoad{RunningTurns: running, Concurrency: concurrency}
	})
	stopWatch, err := dlq.WatchMaxDeliveries(ctx, conn.NC, conn.JS, conn.Names, conn.Names.InboundStream(), conn.Names.WorkerConsumer(), log)
	if err != nil {
		return errors.Join(err, rt.Close(ctx))
	}
	defer stopWatch()
	stopHooks, err := rt.ServeHooks()
	if err != nil {
		return errors.Join(err, rt.Close(ctx))
	}
	defer func() { _ = stopHooks() }()
	defer observeWorker(conn, o.Plugins, log)()
	if o.OnStarted != nil {
		o.OnStarted()
	}
	runErr := w.Run(ctx)
	grace := o.ShutdownGrace
	if grace == 0 {
		grace = 10 * time.Second
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	return errors.Join(runErr, rt.Close(cctx))
}
