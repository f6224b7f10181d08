package recordercmd

import (
	"context"
	"log/slog"

	"github.com/bubbus/bub/internal/service"
)

// Service returns the recorder service; it writes through the tape store
// of env's plugins (see [Run]).
func Service(env service.Env) service.Spec {
	o := Options{Plugins: env.Plugins}
	return service.Spec{
		Name:  "recorder",
		Short: "Build tapes from lifecycle events (the only tape writer)",
		Run: func(ctx context.Context, conn *service.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return Run(ctx, conn, o, log)
		},
	}
}
