package worker

import (
	"context"
	"sync"
)

// turn is the per-delivery scope the runtime keeps in the context of a
// turn: request-scoped data that crosses the hook boundary (the builtin's
// model stage and its dispatch_outbound run in different hook calls).
type turn struct {
	in Inbound

	mu      sync.Mutex
	flushes []func(context.Context) error // event attachments of the turn's runs
	waited  bool                          // for the session's earlier turns (read-your-writes)
}

type turnKey struct{}

func withTurn(ctx context.Context, t *turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

func turnFrom(ctx context.Context) *turn {
	t, _ := ctx.Value(turnKey{}).(*turn)
	return t
}

func (t *turn) addFlush(flush func(context.Context) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushes = append(t.flushes, flush)
}

// flush waits until every event the turn's runs published is acknowledged.
func (t *turn) flush(ctx context.Context) error {
	t.mu.Lock()
	fs := append([]func(context.Context) error(nil), t.flushes...)
	t.mu.Unlock()
	for _, f := range fs {
		if err := f(ctx); err != nil {
			return err
		}
	}
	return nil
}

// firstWait reports whether the turn has not waited for its session's
// earlier turns yet, and records that it now does.
func (t *turn) firstWait() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.waited
	t.waited = true
	return first
}
