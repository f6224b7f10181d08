package workercmd

import (
	"log/slog"

	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
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
	stopRemote, err := telemetry.ObserveInterceptors(interceptorCalls(plugins))
	if err != nil {
		log.Warn("telemetry.observe_failed", "err", err)
		stopRemote = func() error { return nil }
	}
	return func() { _ = stopJS(); _ = stopRemote() }
}

// interceptorCalls reads the call counts of the remote interceptors among
// plugins for telemetry.ObserveInterceptors; nil when there is none.
func interceptorCalls(plugins []hooks.Plugin) func() []telemetry.InterceptorCalls {
	var remotes []*remote.Plugin
	for _, p := range plugins {
		if r, ok := hooks.As[*remote.Plugin](p); ok {
			remotes = append(remotes, r)
		}
	}
	if len(remotes) == 0 {
		return nil
	}
	return func() []telemetry.InterceptorCalls {
		out := make([]telemetry.InterceptorCalls, 0, len(remotes))
		for _, r := range remotes {
			st := r.Stats()
			calls := make(map[string]uint64, 8)
			for outcome, n := range st.ByOutcome() {
				calls[string(outcome)] = n
			}
			out = append(out, telemetry.InterceptorCalls{Service: st.Service, ByOutcome: calls})
		}
		return out
	}
}
