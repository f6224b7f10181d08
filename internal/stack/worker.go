package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// WorkerOptions configures [RunWorker].
type WorkerOptions struct {
	Worker    worker.Config
	Topology  natsx.Topology
	Instance  string
	Models    llm.Config
	Workspace string
	Agent     agent.Settings
	// Plugins are registered after the builtin plugin, in order.
	Plugins []hooks.Plugin
	// ShutdownGrace bounds the final flush and plugin close (10s).
	ShutdownGrace time.Duration
}

// NewRuntime builds a worker's turn runtime on conn.
func NewRuntime(ctx context.Context, conn *Conn, o WorkerOptions, log *slog.Logger) (*worker.Runtime, error) {
	if err := natsx.EnsureTopology(ctx, conn.JS, conn.Names, o.Topology); err != nil {
		return nil, err
	}
	store, err := tape.NewJetStreamStore(ctx, conn.JS, conn.Names)
	if err != nil {
		return nil, err
	}
	state, err := conn.JS.KeyValue(ctx, conn.Names.StateBucket())
	if err != nil {
		return nil, fmt.Errorf("binding state bucket: %w", err)
	}
	return worker.NewRuntime(ctx, worker.RuntimeOptions{
		NC: conn.NC, JS: conn.JS, Names: conn.Names,
		Source:    events.Source("worker", o.Instance),
		Tapes:     store,
		State:     state,
		Models:    o.Models,
		Workspace: o.Workspace,
		Agent:     o.Agent,
		Plugins:   o.Plugins,
		Log:       log,
	})
}

// RunWorker consumes inbound envelopes on conn until ctx ends, then drains.
func RunWorker(ctx context.Context, conn *Conn, o WorkerOptions, log *slog.Logger) error {
	rt, err := NewRuntime(ctx, conn, o, log)
	if err != nil {
		return err
	}
	w, err := worker.New(o.Worker, conn.JS, conn.Names, rt, log)
	if err != nil {
		return errors.Join(err, rt.Close(ctx))
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

// RecorderOptions configures [RunRecorder].
type RecorderOptions struct {
	Recorder recorder.Config
	Topology natsx.Topology
	Instance string
}

// RunRecorder builds tapes from lifecycle events on conn until ctx ends.
func RunRecorder(ctx context.Context, conn *Conn, o RecorderOptions, log *slog.Logger) error {
	if err := natsx.EnsureTopology(ctx, conn.JS, conn.Names, o.Topology); err != nil {
		return err
	}
	store, err := tape.NewJetStreamStore(ctx, conn.JS, conn.Names)
	if err != nil {
		return err
	}
	state, err := conn.JS.KeyValue(ctx, conn.Names.StateBucket())
	if err != nil {
		return fmt.Errorf("binding state bucket: %w", err)
	}
	return recorder.New(o.Recorder, conn.JS, conn.Names, store, state, log).Run(ctx)
}
