package recordercmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recorder"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// Options configures [Run].
type Options struct {
	Recorder recorder.Config
	Topology natsx.Topology
	Instance string
	// Plugins are registered after the builtin plugin, in order; the
	// recorder writes through the store their provide_tape_store
	// resolves (the builtin's is JetStream).
	Plugins []hooks.Plugin
}

// Run builds tapes from lifecycle events on conn until ctx ends.
func Run(ctx context.Context, conn *service.Conn, o Options, log *slog.Logger) error {
	if err := natsx.EnsureTopologyLogged(ctx, conn.JS, conn.Names, conn.TopologyOr(o.Topology), log); err != nil {
		return err
	}
	state, err := conn.JS.KeyValue(ctx, conn.Names.StateBucket())
	if err != nil {
		return fmt.Errorf("binding state bucket: %w", err)
	}
	return WithTapeStore(ctx, conn, o.Plugins, log, func(store tape.Store) error {
		rs, ok := store.(recorder.Store)
		if !ok {
			return fmt.Errorf("the tape store %T cannot archive (tape.Archiver), which the recorder needs for tape.reset archive=true", store)
		}
		defer observeRecorder(conn, log)()
		conn.ReportStatus(func() any { return lag(conn) })
		return recorder.New(o.Recorder, conn.JS, conn.Names, rs, state, log).Run(ctx)
	})
}

// WithTapeStore runs body with the tape store of a runtime scope: a
// registry of the builtin plugin (which provides JetStream) and plugins,
// started, its scope open for the duration of body and closed after it.
func WithTapeStore(ctx context.Context, conn *service.Conn, plugins []hooks.Plugin, log *slog.Logger, body func(tape.Store) error) (err error) {
	tapes := func(ctx context.Context) (tape.Store, error) {
		return tape.NewJetStreamStore(ctx, conn.JS, conn.Names, tape.WithoutProvisioning())
	}
	reg, err := builtin.StartupRegistry(builtin.Startup{TapeStore: tapes}, plugins, log)
	if err != nil {
		return err
	}
	if err := reg.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, reg.Close(context.WithoutCancel(ctx))) }()
	scope, err := reg.OpenScope(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, scope.Close(context.WithoutCancel(ctx))) }()
	store := scope.TapeStore()
	if store == nil {
		return errors.New("no plugin provides a tape store (provide_tape_store)")
	}
	return body(store)
}

// observeRecorder registers the lag of the recorder's consumer. The
// returned function unregisters it.
func observeRecorder(conn *service.Conn, log *slog.Logger) func() {
	n := conn.Names
	stop, err := telemetry.ObserveJetStream(conn.JS, []telemetry.Consumer{{Stream: n.EventsStream(), Consumer: n.RecorderConsumer()}}, "")
	if err != nil {
		log.Warn("telemetry.observe_failed", "err", err)
		return func() {}
	}
	return func() { _ = stop() }
}

// statusTimeout bounds the consumer lookup of a status request.
const statusTimeout = 2 * time.Second

// lag is the recorder's status detail: the events of its consumer not
// yet committed to a tape (pending plus delivered and held), as `bub
// status` counts them.
func lag(conn *service.Conn) any {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	c, err := conn.JS.Consumer(ctx, conn.Names.EventsStream(), conn.Names.RecorderConsumer())
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	ci := c.CachedInfo()
	return map[string]uint64{"lag": ci.NumPending + uint64(ci.NumAckPending)}
}
