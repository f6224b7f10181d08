package events

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// This file holds the dispatch rules of the in-process EventBus; they are
// stated once, on [Emit], and docs/events/README.md ("Inside a worker: the
// run's event bus") summarises them.

// Bus is the in-process EventBus of one agent run. Register handlers with
// [On] and dispatch events with [Emit]; [Bus.OnEmitted] adds sinks that see
// each event after its handlers (the NATS [Bridge] is one).
//
// The zero value is an empty bus ready to use. A Bus must not be copied
// after first use. All methods are safe for concurrent use: registration
// is copy-on-write, so [Emit] never takes a lock and never allocates when
// no handler matches.
type Bus struct {
	// mu serialises registration changes; dispatch reads set without it.
	mu  sync.Mutex
	set atomic.Pointer[handlerSet]
}

// handlerSet is an immutable snapshot of a bus's registrations. Changes
// build a new set and swap it in.
type handlerSet struct {
	handlers []*handler
	sinks    []*sink
}

// handler is one registration made by [On].
type handler struct {
	// name identifies the registration in errors: the registered type and
	// the handler function.
	name string
	// exact is the registered type when it is concrete, nil for an
	// interface; dispatch skips a concrete handler of another type without
	// calling it.
	exact reflect.Type
	// call runs the handler when ev matches its type.
	call func(ctx context.Context, ev Event) error
}

// sink is one registration made by [Bus.OnEmitted].
type sink struct {
	fn func(ctx context.Context, ev Event)
}

// On registers h for every event that is a T: T is either a concrete event
// type (e.g. *ToolCallFinished), which matches exactly that type, or an
// interface (e.g. [AgentEvent], [TapeEvent], or any interface of the
// caller's that embeds [Event]), which matches every event implementing
// it. Handlers run in registration order; see [Emit] for the rules.
//
// The returned off removes this registration (Bub's events.off); calling
// it again does nothing. Registering the same function twice makes two
// registrations, each with its own off. A registration made or removed
// while an [Emit] is running takes effect from the next Emit.
func On[T Event](b *Bus, h func(ctx context.Context, ev T) error) (off func()) {
	if h == nil {
		panic("events: On called with a nil handler")
	}
	typ := reflect.TypeFor[T]()
	r := &handler{
		name: fmt.Sprintf("On[%s] %s", typ, funcName(h)),
		call: func(ctx context.Context, ev Event) error {
			t, ok := ev.(T)
			if !ok {
				return nil
			}
			return h(ctx, t)
		},
	}
	if typ.Kind() != reflect.Interface {
		r.exact = typ
	}
	b.update(func(s *handlerSet) { s.handlers = append(s.handlers, r) })
	return func() { b.update(func(s *handlerSet) { s.handlers = without(s.handlers, r) }) }
}

// OnEmitted registers fn to be called with every event after its dispatch
// has ended — all matching handlers ran, a handler stopped the event, or a
// handler failed — so fn sees the final value. Sinks run in registration
// order, after the handlers, on the emitting goroutine, and must not
// panic. The returned off removes the sink and is idempotent.
//
// This is where the NATS [Bridge] sits: as a sink it publishes what the
// handlers left, after they could change the event, and it publishes even
// when a later handler fails, as a first-registered recorder would have
// seen the event in Bub.
func (b *Bus) OnEmitted(fn func(ctx context.Context, ev Event)) (off func()) {
	if fn == nil {
		panic("events: OnEmitted called with a nil function")
	}
	k := &sink{fn: fn}
	b.update(func(s *handlerSet) { s.sinks = append(s.sinks, k) })
	return func() { b.update(func(s *handlerSet) { s.sinks = without(s.sinks, k) }) }
}

// update applies change to a copy of the current registrations and makes
// the copy current.
func (b *Bus) update(change func(*handlerSet)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := &handlerSet{}
	if cur := b.set.Load(); cur != nil {
		next.handlers = slices.Clone(cur.handlers)
		next.sinks = slices.Clone(cur.sinks)
	}
	change(next)
	b.set.Store(next)
}

// without returns a copy of list without x; the copy never shares list's
// backing array, so snapshots stay immutable.
func without[P comparable](list []P, x P) []P {
	return slices.DeleteFunc(slices.Clone(list), func(y P) bool { return y == x })
}

// Emit dispatches ev on b and returns it with whatever the handlers
// changed (Bub's events.emit). The rules, which are Bub's:
//
//   - Every handler whose registered type ev satisfies runs, in
//     registration order, one at a time, on the calling goroutine; a
//     handler registered on an interface receives every event implementing
//     it.
//   - If ev implements [Stopper], Stopped is checked before each handler;
//     once it is true the remaining handlers are skipped (a decision on
//     [LLMCallStarted] or [ToolCallStarted] stops them).
//   - A handler's error stops the dispatch and is returned as a
//     *[HandlerError] naming the handler and the event; a panicking handler
//     is recovered and reported the same way with a *[PanicError] inside.
//     Observers that must not fail the run handle their own errors.
//   - After the handlers, every sink registered with [Bus.OnEmitted] sees
//     the final event, also when a handler failed.
//
// Emit takes no lock while handlers run, so handlers may emit, register
// and unregister. Ordering holds within one Emit only: concurrent tool
// calls emit concurrently, so a handler runs concurrently with itself and
// must guard any state it shares between invocations (the event is owned
// by its Emit, and [bub.State] is already safe). ev must not be nil.
func Emit[E Event](ctx context.Context, b *Bus, ev E) (E, error) {
	s := b.set.Load()
	if s == nil {
		return ev, nil
	}
	return ev, s.dispatch(ctx, ev)
}

func (s *handlerSet) dispatch(ctx context.Context, ev Event) error {
	var err error
	typ := reflect.TypeOf(ev)
	stopper, _ := ev.(Stopper)
	for i, h := range s.handlers {
		if h.exact != nil && h.exact != typ {
			continue
		}
		if stopper != nil && stopper.Stopped() {
			break
		}
		if err = h.run(ctx, i, ev); err != nil {
			break
		}
	}
	for _, k := range s.sinks {
		k.fn(ctx, ev)
	}
	return err
}

// run calls the handler, turning its error or panic into a *HandlerError.
func (h *handler) run(ctx context.Context, index int, ev Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &HandlerError{Handler: h.name, Index: index, Event: ev, Err: &PanicError{Value: r, Stack: debug.Stack()}}
		}
	}()
	if err := h.call(ctx, ev); err != nil {
		return &HandlerError{Handler: h.name, Index: index, Event: ev, Err: err}
	}
	return nil
}

// HandlerError reports the handler that failed an [Emit].
type HandlerError struct {
	// Handler names the registration: its type and function.
	Handler string
	// Index is the handler's position among the bus's registrations.
	Index int
	// Event is the event being dispatched, as the handler left it.
	Event Event
	// Err is the handler's error, or a *PanicError.
	Err error
}

// Error returns "events: handler <name> (#<index>) for <event type>: <err>".
func (e *HandlerError) Error() string {
	return fmt.Sprintf("events: handler %s (#%d) for %T: %v", e.Handler, e.Index, e.Event, e.Err)
}

// Unwrap returns the handler's error.
func (e *HandlerError) Unwrap() error { return e.Err }

// PanicError is a recovered handler panic.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the stack trace of the panicking goroutine.
	Stack []byte
}

// Error returns "panic: <value>" followed by the stack trace.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// funcName returns the name of the function f, for error messages.
func funcName(f any) string {
	if fn := runtime.FuncForPC(reflect.ValueOf(f).Pointer()); fn != nil {
		return fn.Name()
	}
	return "?"
}
