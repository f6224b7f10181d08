package hooks

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Scope is one runtime scope (Bub's BubFramework.running()): the tape
// store and the steering inbox are resolved once when it opens, handed out
// unchanged while it is open, and closed when it ends. `bub run` opens a
// scope around one turn; long-running services keep one open until they
// stop.
type Scope[S any] struct {
	// slot is the registry's open-scope pointer, released by Close.
	slot    *atomic.Pointer[Scope[S]]
	store   S
	inbox   SteeringInbox
	closers []resource
	// closed is false only while the scope is open; store and inbox are
	// written before it first becomes false and never after.
	closed atomic.Bool
}

// OpenScope opens the runtime scope: provide_tape_store and
// provide_steering_inbox are resolved (first result, once). Only one scope
// may be open at a time; OpenScope returns [ErrScopeOpen] otherwise.
func (r *Registry[S, C]) OpenScope(ctx context.Context) (*Scope[S], error) {
	sc := &Scope[S]{slot: &r.scope}
	sc.closed.Store(true)
	if !r.scope.CompareAndSwap(nil, sc) {
		return nil, fmt.Errorf("opening runtime scope: %w", ErrScopeOpen)
	}
	store, inbox, closers, err := r.resolveScope(ctx)
	if err != nil {
		r.scope.Store(nil)
		return nil, fmt.Errorf("opening runtime scope: %w", err)
	}
	sc.store, sc.inbox, sc.closers = store, inbox, closers
	sc.closed.Store(false)
	return sc, nil
}

// TapeStore returns the tape store of the open scope, or the zero value
// (nil for interface types) outside a scope or when no plugin provides one.
func (r *Registry[S, C]) TapeStore() S { return r.scope.Load().TapeStore() }

// SteeringInbox returns the steering inbox of the open scope, or nil
// outside a scope or when no plugin provides one.
func (r *Registry[S, C]) SteeringInbox() SteeringInbox { return r.scope.Load().SteeringInbox() }

// TapeStore returns the scope's tape store; the zero value once the scope
// is closed.
func (s *Scope[S]) TapeStore() S {
	if s == nil || s.closed.Load() {
		var zero S
		return zero
	}
	return s.store
}

// SteeringInbox returns the scope's steering inbox; nil once the scope is
// closed.
func (s *Scope[S]) SteeringInbox() SteeringInbox {
	if s == nil || s.closed.Load() {
		return nil
	}
	return s.inbox
}

// Close ends the scope: the provided steering inbox and then the provided
// tape store are closed if they implement [Closer], and another scope may
// open. Closing again does nothing.
func (s *Scope[S]) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := closeAll(ctx, s.closers)
	s.slot.CompareAndSwap(s, nil)
	return err
}
