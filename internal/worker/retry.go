package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/pipeline"
)

// A turn that fails because NATS was unavailable (a tape read, a state
// read, an event publish timing out while the server restarts) is an
// infrastructure failure, not the user's: it is handed back for
// redelivery instead of being answered with an error. The error reply
// on_error dispatches for the failed turn (builtin.ErrorReplyID of stage
// pipeline.StageTurn) is therefore held back until the turn's outcome is
// known and dropped when the turn is retried, so the user sees exactly one
// answer.

// retryUnlessTooLarge marks err, a failed publish of the turn, for a
// retry (ErrRetry), unless it failed because a message is larger than the
// NATS server takes (nats.ErrMaxPayload): that fails the same way on
// every delivery, so the turn fails at once, answered with its error
// reply, and its inbound envelope is dead-lettered as
// dlq.ReasonPayloadTooLarge, to be replayed once the server's max_payload
// is raised.
func retryUnlessTooLarge(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRetry, err)
}

// holdFailureReply keeps env when it is the turn-failure reply of the turn
// ctx runs in and reports whether it did.
func holdFailureReply(ctx context.Context, env *envelope.Envelope) bool {
	t := turnFrom(ctx)
	if t == nil || env.Kind != envelope.KindError || env.ID != builtin.ErrorReplyID(t.envelope, pipeline.StageTurn) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failure = env
	return true
}

// takeFailure returns the held-back turn-failure reply, nil for none.
func (t *turn) takeFailure() *envelope.Envelope {
	t.mu.Lock()
	defer t.mu.Unlock()
	env := t.failure
	t.failure = nil
	return env
}

// connWatch notices whether a NATS connection was disrupted during a turn.
type connWatch struct {
	nc         *nats.Conn
	reconnects uint64
}

func watchConn(nc *nats.Conn) connWatch {
	if nc == nil {
		return connWatch{}
	}
	return connWatch{nc: nc, reconnects: nc.Stats().Reconnects}
}

// disrupted reports whether the connection is down now or reconnected
// since the watch began.
func (w connWatch) disrupted() bool {
	return w.nc != nil && (!w.nc.IsConnected() || w.nc.Stats().Reconnects != w.reconnects)
}

// settleFailure decides the outcome of a failed turn: a failure while
// NATS was disrupted becomes a retry (the held-back error reply is
// dropped); any other failure is answered with the held-back reply.
func (rt *Runtime) settleFailure(ctx context.Context, w connWatch, t *turn, err error) error {
	if err != nil && !errors.Is(err, ErrRetry) && w.disrupted() {
		rt.log.Warn("worker.turn_failed_during_nats_outage", "err", err)
		err = fmt.Errorf("%w: the turn failed while NATS was unavailable: %w", ErrRetry, err)
	}
	env := t.takeFailure()
	if errors.Is(err, ErrRetry) || env == nil {
		return err
	}
	if serr := rt.sendNow(ctx, env); serr != nil { // Send would hold it back again
		return fmt.Errorf("%w: answering the failed turn: %w", ErrRetry, serr)
	}
	return err
}
