package worker

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/bubbus/bub/pkg/agent"
)

// slot is a running turn's place among the worker's Concurrency turns. A
// turn whose tool call waits for a person's approval gives it back while
// it waits (park) and takes one again to go on (resume; over Concurrency
// when none is free, as the turns holding them may wait for it): a
// parked turn holds only its un-acknowledged inbound message and a
// goroutine, so the hours an approval can take cost no turn slot. Parks
// nest (parallel tool calls of one step may each wait).
type slot struct {
	sem     chan struct{}
	running *atomic.Int64

	mu     sync.Mutex
	parked int
	over   bool // resumed without a free slot: it holds none
}

type slotKey struct{}

func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// slotFrom returns the turn's slot, nil outside a worker's turn (the
// methods of a nil slot do nothing).
func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey{}).(*slot)
	return s
}

// park gives the slot back when the first wait of the turn begins.
func (s *slot) park() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parked++
	if s.parked == 1 {
		s.release()
	}
}

// resume takes a slot again when the last wait of the turn ended. When
// every slot is taken it goes on without one, over Concurrency, rather
// than wait: the turns holding them may be waiting for this one (a
// follow-up of its session waits inside its slot for the session's
// running turns).
func (s *slot) resume() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parked--; s.parked > 0 {
		return
	}
	select {
	case s.sem <- struct{}{}:
	default:
		s.over = true
	}
	s.running.Add(1)
}

// release gives back what the turn holds: its slot, or nothing when it
// runs over Concurrency.
func (s *slot) release() {
	if s.over {
		s.over = false
	} else {
		<-s.sem
	}
	s.running.Add(-1)
}

// done gives the slot back when the turn ends, unless it is parked.
func (s *slot) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parked == 0 {
		s.release()
	}
}

// parking is the approver of a worker's runs: while a call waits for its
// answer, the turn's slot is given back.
type parking struct{ agent.Approver }

func (p parking) Wait(ctx context.Context, id string) (agent.Approval, error) {
	s := slotFrom(ctx)
	s.park()
	a, err := p.Approver.Wait(ctx, id)
	s.resume()
	return a, err
}

// approver is the runs' approver: RuntimeOptions.Approvals giving the
// turn's slot back while it waits, nil when there is none.
func (rt *Runtime) approver() agent.Approver {
	if rt.o.Approvals == nil {
		return nil
	}
	return parking{rt.o.Approvals}
}
