package stack

import (
	"log/slog"

	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/hooks"
)

// observeWorker registers a worker's observed metrics: the lag of the
// shared inbound consumer, the dead-letter count and the calls of its
// remote interceptors. The returned function unregisters them.
func observeWorker(conn *Conn, plugins []hooks.Plugin, log *slog.Logger) func() {
	n := conn.Names
	stopJS, err := telemetry.ObserveJetStream(conn.JS, []telemetry.Consumer{{Stream: n.InboundStream(), Consumer: n.WorkerConsumer()}}, n.DLQStream())
	if err != nil {
		log.Warn("telemetry.observe_failed", "err", err)
		stopJS = func() error { return nil }
	}
	stopRemote, err := telemetry.ObserveInterceptors(plugins)
	if err != nil {
		log.Warn("telemetry.observe_failed", "err", err)
		stopRemote = func() error { return nil }
	}
	return func() { _ = stopJS(); _ = stopRemote() }
}

// observeRecorder registers the lag of the recorder's consumer. The
// returned function unregisters it.
func observeRecorder(conn *Conn, log *slog.Logger) func() {
	n := conn.Names
	stop, err := telemetry.ObserveJetStream(conn.JS, []telemetry.Consumer{{Stream: n.EventsStream(), Consumer: n.RecorderConsumer()}}, "")
	if err != nil {
		log.Warn("telemetry.observe_failed", "err", err)
		return func() {}
	}
	return func() { _ = stop() }
}
