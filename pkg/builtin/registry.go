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
// builds its runtime's registry itself.
func StartupRegistry(st Startup, plugins []hooks.Plugin, log *slog.Logger) (*hooks.Registry[tape.Store, tape.Context], error) {
	reg := hooks.New[tape.Store, tape.Context](hooks.WithLogger(log))
	for _, p := range append([]hooks.Plugin{New(Options{Startup: st})}, plugins...) {
		if err := reg.Register(p); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
