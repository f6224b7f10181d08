package workercmd

import (
	"log/slog"

	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/hooks"
)

// observeWorker registers a worker's observed metrics: the lag of the
// shared inbound consumer, the dead-letter count and the calls of its
// remote interceptors. The returned function unregisters them.
func observeWorker(conn *service.Conn, plugins []hooks.Plugin, log *slog.Logger) func() {
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
