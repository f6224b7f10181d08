package bubcmd

import (
	"context"
	"log/slog"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/stack"
)

// runService connects a standalone service (which needs a NATS URL), runs
// body and drains the connection afterwards.
func runService(ctx context.Context, common *cli.Common, name string, log *slog.Logger, body func(*stack.Conn) error) error {
	stopTelemetry, err := setupTelemetry(ctx, common, name, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	cl, err := stack.Open(common, false, "", log)
	if err != nil {
		return err
	}
	defer cl.Shutdown()
	conn, err := cl.Connect(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	return body(conn)
}
