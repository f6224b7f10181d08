package worker

import (
	"context"
	"sync"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/tape"
)

// turn is the runtime's own record of a turn it runs, kept while control
// is inside the hook registry: the builtin's model stage, its
// dispatch_outbound and on_error are separate hook calls that call back
// into the runtime (RunAgent, Send, the quit tool). The turn's data — the
// inbound envelope, its delivery, its session and steering inbox — travels
// in the turn's inputs (Inbound, pipeline.Turn, hooks.RunModelInput); this
// record holds no data a stage needs, only the runtime's bookkeeping of the
// request, so it rides in ctx, and every callback works without it: a Send
// outside a turn (the admission gate's drop reply) flushes nothing and
// holds nothing back, and a quit outside a turn excepts no turn.
type turn struct {
	envelope string // the inbound envelope's id: the caller the quit tool excepts

	mu      sync.Mutex
	flushes []func(context.Context) error // event attachments of the turn's runs
	failure *envelope.Envelope            // the held-back turn-failure reply (retry.go)
	// index is the index of tape indexOf read when the turn started, for
	// its run's fork ("": none, or taken; see takeIndex).
	index   tape.Index
	indexOf string
}

// takeIndex returns the index read when the turn started if it is of
// session and not taken yet: the turn's first run of its session starts
// from it; later runs (a retried run, a subagent's) read their own.
func (t *turn) takeIndex(session string) (tape.Index, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.holds(session) {
		return tape.Index{}, false
	}
	t.indexOf = ""
	return t.index, true
}

// switches returns session's model switches from the index read when the
// turn started (load_state reads them before the run takes the index);
// false without that index, or when it does not know them.
func (t *turn) switches(session string) (tape.Switches, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.holds(session) {
		return tape.Switches{}, false
	}
	return t.index.KnownSwitches()
}

// holds reports whether the turn holds the index of session; t.mu is held.
func (t *turn) holds(session string) bool { return session != "" && t.indexOf == session }

type turnKey struct{}

func withTurn(ctx context.Context, t *turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

// turnFrom returns the turn ctx runs in, nil outside a turn.
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
