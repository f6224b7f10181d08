package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/telemetry"
)

// telemetryFlushTimeout bounds the final export of spans and metrics.
const telemetryFlushTimeout = 5 * time.Second

// StartTelemetry installs OpenTelemetry for a process running service
// (see telemetry.Setup: OTEL_* chooses the exporters, --metrics-addr
// serves /metrics). The returned function flushes and stops it; call it
// after the services stopped.
func StartTelemetry(ctx context.Context, common *cli.Common, service string, log *slog.Logger) (func(), error) {
	shutdown, err := telemetry.Setup(ctx, service,
		telemetry.WithMetricsAddr(common.MetricsAddr),
		telemetry.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlushTimeout)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("telemetry.shutdown_failed", "err", err)
		}
	}, nil
}
