package worker

import (
	"context"
	"errors"

	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/events"
)

// turnStatus is the telemetry status of a turn that ended with err.
func turnStatus(err error) string {
	switch {
	case err == nil:
		return telemetry.TurnOK
	case errors.Is(err, ErrRetry):
		return telemetry.TurnRetry
	default:
		return telemetry.TurnError
	}
}

// tracedAttrs returns a with the trace context of ctx, so an event the
// worker publishes outside a run's bridge continues the turn's trace.
func tracedAttrs(ctx context.Context, a events.Attrs) events.Attrs {
	a.Traceparent, a.Tracestate = telemetry.TraceContext(ctx)
	return a
}
