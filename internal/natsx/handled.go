package natsx

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// Handled counts the messages an asynchronous subscription's handler has
// handled, so that a caller can wait for the handler to catch up. A
// Flush of the connection returns once the client has received every
// message the server sent before it, but the handler runs in the
// subscription's own goroutine and may still be behind: bub chat, having
// the turn's reply, waits for its delta handler before printing.
type Handled struct {
	mu      sync.Mutex
	changed *sync.Cond
	n       int64
}

// NewHandled returns a count of nothing handled yet.
func NewHandled() *Handled {
	h := &Handled{}
	h.changed = sync.NewCond(&h.mu)
	return h
}

// Handler returns f counted.
func (h *Handled) Handler(f nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		f(m)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.n++
		h.changed.Broadcast()
	}
}

// Wait returns once sub's handler (made by h's [Handled.Handler]) has
// handled every message sub had received when Wait was called, or sub
// reports an error (it was closed). Every message the subscription takes
// from its queue is counted once the handler returns, and each count
// wakes Wait.
func (h *Handled) Wait(sub *nats.Subscription) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		pending, _, err := sub.Pending()
		if err != nil {
			return err
		}
		taken, err := sub.Delivered()
		if err != nil {
			return err
		}
		if pending == 0 && h.n >= taken {
			return nil
		}
		h.changed.Wait()
	}
}
