package natsx

import (
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Handled counts the messages an asynchronous subscription's handler has
// handled, so that a caller can wait for the handler to catch up. A
// Flush of the connection returns once the client has received every
// message the server sent before it, but the handler runs in the
// subscription's own goroutine and may still be behind: bub chat, having
// the turn's reply, waits for its delta handler before printing.
type Handled struct {
	n atomic.Int64
	// changed holds a wake-up for Wait once a message was handled.
	changed chan struct{}
}

// NewHandled returns a count of nothing handled yet.
func NewHandled() *Handled {
	return &Handled{changed: make(chan struct{}, 1)}
}

// Handler returns f counted.
func (h *Handled) Handler(f nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		f(m)
		h.n.Add(1)
		select {
		case h.changed <- struct{}{}:
		default: // a wake-up is already waiting
		}
	}
}

// poll is how often Wait looks again without a wake-up.
const poll = 200 * time.Microsecond

// Wait returns once sub's handler (made by h's [Handled.Handler]) has
// handled every message sub had received when Wait was called, or sub
// reports an error (it was closed). It is for one waiter at a time.
//
// nats.go counts a message as taken from the subscription's queue before
// its handler runs, but as no longer pending only after the handler
// returned, on the subscription's goroutine and without a signal. So Wait
// looks again every poll as well as after each handled message: once the
// last message is handled, its pending count may drop only after the
// handler's wake-up, and no handler runs again to say so.
func (h *Handled) Wait(sub *nats.Subscription) error {
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		pending, _, err := sub.Pending()
		if err != nil {
			return err
		}
		taken, err := sub.Delivered()
		if err != nil {
			return err
		}
		if pending == 0 && h.n.Load() >= taken {
			return nil
		}
		timer.Reset(poll)
		select {
		case <-h.changed:
		case <-timer.C:
		}
	}
}
