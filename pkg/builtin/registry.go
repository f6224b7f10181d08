package builtin

import (
	"log/slog"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// StartupRegistry returns a registry of the builtin plugin, whose startup
// and scope hooks answer from st, and then plugins, in order; nothing is
// started. Processes that run no turns (the CLI, the recorder, the
// gateway, `bub tape`) call their startup and scope hooks on it; a worker
// and a replay build theirs with [NewRegistry].
func StartupRegistry(st Startup, plugins []hooks.Plugin, log *slog.Logger) (*hooks.Registry[tape.Store, tape.Context], error) {
	reg, _, err := NewRegistry(Options{Startup: st}, plugins, hooks.WithLogger(log))
	return reg, err
}

// NewRegistry returns a registry of the builtin plugin of o and then
// plugins, in order (the last has the highest priority), with the builtin
// dispatching through it; nothing is started.
func NewRegistry(o Options, plugins []hooks.Plugin, opts ...hooks.Option) (*hooks.Registry[tape.Store, tape.Context], *Plugin, error) {
	reg := hooks.New[tape.Store, tape.Context](opts...)
	bp := New(o)
	for _, p := range append([]hooks.Plugin{bp}, plugins...) {
		if err := reg.Register(p); err != nil {
			return nil, nil, err
		}
	}
	bp.SetDispatcher(reg)
	return reg, bp, nil
}
