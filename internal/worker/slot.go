package worker

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/bubbus/bub/pkg/agent"
)

// slot is a running turn's place among the worker's Concurrency turns. A
// turn whose tool call waits for a person's approval gives it back while
// it waits (park) and takes one again to go on (resume): a parked turn
// holds only its un-acknowledged inbound message and a goroutine, so the
// hours an approval can take cost no turn slot. Parks nest (parallel
// tool calls of one step may each wait).
type slot struct {
	sem     chan struct{}
	running *atomic.Int64

	mu     sync.Mutex
	parked int
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
		<-s.sem
		s.running.Add(-1)
	}
}

// resume takes a slot again when the last wait of the turn ended; it
// fails only when ctx ends first.
func (s *slot) resume(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parked--; s.parked > 0 {
		return nil
	}
	select {
	case s.sem <- struct{}{}:
		s.running.Add(1)
		return nil
	case <-ctx.Done():
		s.parked = 1 // still without a slot: the turn's end must not give one back
		return ctx.Err()
	}
}

// done gives the slot back when the turn ends, unless it is parked.
func (s *slot) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parked == 0 {
		<-s.sem
		s.running.Add(-1)
	}
}

// parking is the approver of a worker's runs: while a call waits for its
// answer, the turn's slot is given back.
type parking struct{ agent.Approver }

func (p parking) Wait(ctx context.Context, id string) (agent.Approval, error) {
	s := slotFrom(ctx)
	s.park()
	a, err := p.Approver.Wait(ctx, id)
	if rerr := s.resume(ctx); err == nil {
		err = rerr
	}
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
