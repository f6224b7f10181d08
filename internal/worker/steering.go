package worker

import (
	"context"

	"github.com/bubbus/bub/pkg/agent"
)

type steeringKey struct{}

// WithSteering returns ctx carrying the steering inbox of the turn it
// runs; the turn's agent runs drain it at every MessagesPending.
func WithSteering(ctx context.Context, s agent.Steering) context.Context {
	return context.WithValue(ctx, steeringKey{}, s)
}

// SteeringFrom returns the turn's steering inbox, nil when it has none.
func SteeringFrom(ctx context.Context) agent.Steering {
	if s, ok := ctx.Value(steeringKey{}).(agent.Steering); ok && s != nil {
		return s
	}
	return nil
}
