package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tools"
)

// pinged is a custom test event: handlers append to Trail, Stop makes it
// stopped.
type pinged struct {
	events.Meta
	Trail []string
	Stop  bool
}

func (p *pinged) Stopped() bool    { return p.Stop }
func (p *pinged) trail() *[]string { return &p.Trail }

// ponged is a second custom event that also has a trail but never stops.
type ponged struct {
	events.Meta
	Trail []string
}

func (p *ponged) trail() *[]string { return &p.Trail }

// trailed is a caller-defined event interface: every event with a trail.
type trailed interface {
	events.Event
	trail() *[]string
}

// mark returns a handler that appends name to the event's trail.
func mark[T trailed](name string) func(context.Context, T) error {
	return func(_ context.Context, ev T) error {
		*ev.trail() = append(*ev.trail(), name)
		return nil
	}
}

// TestEmitRules pins the dispatch rules of [events.Emit], one row per rule.
func TestEmitRules(t *testing.T) {
	ctx := context.Background()
	errBoom := errors.New("boom")
	tests := []struct {
		rule string
		run  func(t *testing.T, b *events.Bus)
	}{
		{"matching handlers run in registration order", func(t *testing.T, b *events.Bus) {
			events.On(b, mark[*pinged]("a"))
			events.On(b, mark[trailed]("b"))
			events.On(b, mark[*pinged]("c"))
			ev := mustEmit(t, b, &pinged{})
			wantTrail(t, ev.Trail, "a", "b", "c")
		}},
		{"a handler on an interface receives every event implementing it", func(t *testing.T, b *events.Bus) {
			var seen []string
			events.On(b, func(_ context.Context, ev events.AgentEvent) error {
				seen = append(seen, fmt.Sprintf("%T", ev))
				return nil
			})
			events.On(b, mark[trailed]("trailed"))
			events.On(b, mark[*ponged]("ponged only"))
			p := mustEmit(t, b, &pinged{})
			q := mustEmit(t, b, &ponged{})
			mustEmit(t, b, &events.StepStarted{Step: 1})
			wantTrail(t, p.Trail, "trailed")
			wantTrail(t, q.Trail, "trailed", "ponged only")
			wantTrail(t, seen, "*events_test.pinged", "*events_test.ponged", "*events.StepStarted")
		}},
		{"a handler on a concrete type does not receive other types", func(t *testing.T, b *events.Bus) {
			events.On(b, func(context.Context, *ponged) error { return errBoom })
			if _, err := events.Emit(ctx, b, &pinged{}); err != nil {
				t.Fatalf("Emit: %v", err)
			}
		}},
		{"Emit returns the event as the handlers changed it", func(t *testing.T, b *events.Bus) {
			events.On(b, func(_ context.Context, ev *events.StepFinished) error {
				ev.NextPrompt = "go on"
				return nil
			})
			ev := mustEmit(t, b, &events.StepFinished{Step: 1, Status: events.StepContinue})
			if ev.NextPrompt != "go on" {
				t.Fatalf("NextPrompt = %q", ev.NextPrompt)
			}
		}},
		{"a handler error stops dispatch and reaches the emitter", func(t *testing.T, b *events.Bus) {
			events.On(b, mark[*pinged]("a"))
			events.On(b, func(context.Context, *pinged) error { return errBoom })
			events.On(b, mark[*pinged]("never"))
			ev, err := events.Emit(ctx, b, &pinged{})
			if !errors.Is(err, errBoom) {
				t.Fatalf("err = %v, want boom", err)
			}
			var he *events.HandlerError
			if !errors.As(err, &he) || he.Index != 1 || !strings.Contains(he.Handler, "On[*events_test.pinged]") || he.Event != events.Event(ev) {
				t.Fatalf("HandlerError = %+v", he)
			}
			if !strings.Contains(err.Error(), "for *events_test.pinged") {
				t.Fatalf("message %q does not name the event", err)
			}
			wantTrail(t, ev.Trail, "a")
		}},
		{"a panicking handler is recovered and reported", func(t *testing.T, b *events.Bus) {
			events.On(b, func(context.Context, *pinged) error { panic(errBoom) })
			events.On(b, mark[*pinged]("never"))
			ev, err := events.Emit(ctx, b, &pinged{})
			var pe *events.PanicError
			if !errors.As(err, &pe) || !errors.Is(err, errBoom) || len(pe.Stack) == 0 {
				t.Fatalf("err = %v, want a PanicError wrapping boom", err)
			}
			wantTrail(t, ev.Trail)
		}},
		{"once the event is stopped the remaining handlers are skipped", func(t *testing.T, b *events.Bus) {
			events.On(b, mark[*pinged]("a"))
			events.On(b, func(_ context.Context, ev *pinged) error {
				ev.Stop = true
				return nil
			})
			events.On(b, mark[*pinged]("never"))
			ev := mustEmit(t, b, &pinged{})
			wantTrail(t, ev.Trail, "a")
		}},
		{"an event emitted stopped reaches no handler", func(t *testing.T, b *events.Bus) {
			events.On(b, mark[*pinged]("never"))
			ev := mustEmit(t, b, &pinged{Stop: true})
			wantTrail(t, ev.Trail)
		}},
		{"off removes the registration and is idempotent", func(t *testing.T, b *events.Bus) {
			offA := events.On(b, mark[*pinged]("a"))
			events.On(b, mark[*pinged]("b"))
			offA()
			offA()
			ev := mustEmit(t, b, &pinged{})
			wantTrail(t, ev.Trail, "b")
		}},
		{"the same function registered twice runs twice, each off removes one", func(t *testing.T, b *events.Bus) {
			h := mark[*pinged]("h")
			off := events.On(b, h)
			events.On(b, h)
			wantTrail(t, mustEmit(t, b, &pinged{}).Trail, "h", "h")
			off()
			wantTrail(t, mustEmit(t, b, &pinged{}).Trail, "h")
		}},
		{"registrations changed during an emit apply from the next emit", func(t *testing.T, b *events.Bus) {
			var offB func()
			events.On(b, func(ctx context.Context, ev *pinged) error {
				ev.Trail = append(ev.Trail, "a")
				if offB != nil {
					offB()
					offB = nil
					events.On(b, mark[*pinged]("late"))
				}
				return nil
			})
			offB = events.On(b, mark[*pinged]("b"))
			wantTrail(t, mustEmit(t, b, &pinged{}).Trail, "a", "b")
			wantTrail(t, mustEmit(t, b, &pinged{}).Trail, "a", "late")
		}},
		{"handlers may emit on the same bus", func(t *testing.T, b *events.Bus) {
			events.On(b, func(ctx context.Context, ev *pinged) error {
				q, err := events.Emit(ctx, b, &ponged{})
				ev.Trail = append(ev.Trail, q.Trail...)
				return err
			})
			events.On(b, mark[*ponged]("inner"))
			wantTrail(t, mustEmit(t, b, &pinged{}).Trail, "inner")
		}},
		{"sinks see the final event after the handlers, even when one failed or stopped it", func(t *testing.T, b *events.Bus) {
			var got []string
			off := b.OnEmitted(func(_ context.Context, ev events.Event) {
				if p, ok := ev.(*pinged); ok {
					got = append(got, strings.Join(p.Trail, "+"))
				}
			})
			events.On(b, mark[*pinged]("a"))
			events.On(b, func(_ context.Context, ev *pinged) error {
				if len(ev.Trail) > 0 && ev.Trail[0] == "fail" {
					return errBoom
				}
				ev.Stop = ev.Stop || len(ev.Trail) > 1
				return nil
			})
			mustEmit(t, b, &pinged{})
			mustEmit(t, b, &pinged{Trail: []string{"x"}})
			if _, err := events.Emit(ctx, b, &pinged{Trail: []string{"fail"}}); !errors.Is(err, errBoom) {
				t.Fatalf("err = %v", err)
			}
			off()
			off()
			mustEmit(t, b, &pinged{})
			wantTrail(t, got, "a", "x+a", "fail+a")
		}},
		{"an empty bus returns the event unchanged", func(t *testing.T, b *events.Bus) {
			ev := &pinged{Trail: []string{"kept"}}
			got, err := events.Emit(ctx, b, ev)
			if err != nil || got != ev {
				t.Fatalf("Emit = %v, %v", got, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) { tc.run(t, &events.Bus{}) })
	}
}

func TestOnNilHandlerPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("On(nil) did not panic")
		}
	}()
	events.On[*pinged](&events.Bus{}, nil)
}

// TestConcurrentEmit emits from many goroutines while others register and
// unregister; run with -race.
func TestConcurrentEmit(t *testing.T) {
	ctx := context.Background()
	var b events.Bus
	state := bub.NewState(nil)
	var mu sync.Mutex
	count := 0
	events.On(&b, func(_ context.Context, ev *events.ToolCallFinished) error {
		ev.Result.Result = "seen"
		mu.Lock()
		count++
		mu.Unlock()
		return nil
	})
	var sinkMu sync.Mutex
	sunk := 0
	b.OnEmitted(func(context.Context, events.Event) {
		sinkMu.Lock()
		sunk++
		sinkMu.Unlock()
	})
	const emitters, perEmitter = 8, 200
	var wg sync.WaitGroup
	for range emitters {
		wg.Go(func() {
			for range perEmitter {
				ev, err := events.Emit(ctx, &b, &events.ToolCallFinished{Meta: events.Meta{State: state}, Result: &tools.Result{}})
				if err != nil || ev.Result.Result != "seen" {
					t.Errorf("Emit = %v, %v", ev.Result.Result, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range perEmitter {
			off := events.On(&b, func(_ context.Context, ev events.AgentEvent) error {
				ev.EventMeta().State.Set("touched", true)
				return nil
			})
			off()
		}
	})
	wg.Wait()
	if count != emitters*perEmitter || sunk != emitters*perEmitter {
		t.Fatalf("handler ran %d times, sink %d, want %d", count, sunk, emitters*perEmitter)
	}
}

// TestEmitAllocations pins the zero-cost promise: dispatch allocates
// nothing when no handler matches, nor for a non-allocating handler.
func TestEmitAllocations(t *testing.T) {
	ctx := context.Background()
	ev := &events.StepStarted{Step: 1}
	var empty events.Bus
	var other events.Bus
	for range 8 {
		events.On(&other, func(context.Context, *events.ToolCallStarted) error { return nil })
	}
	var matching events.Bus
	events.On(&matching, func(_ context.Context, ev *events.StepStarted) error {
		ev.Step++
		return nil
	})
	events.On(&matching, func(context.Context, events.AgentEvent) error { return nil })
	for name, b := range map[string]*events.Bus{"empty": &empty, "no match": &other, "matching": &matching} {
		if n := testing.AllocsPerRun(100, func() { _, _ = events.Emit(ctx, b, ev) }); n != 0 {
			t.Errorf("%s: %v allocations per Emit, want 0", name, n)
		}
	}
}

func mustEmit[E events.Event](t *testing.T, b *events.Bus, ev E) E {
	t.Helper()
	got, err := events.Emit(context.Background(), b, ev)
	if err != nil {
		t.Fatalf("Emit(%T): %v", ev, err)
	}
	return got
}

func wantTrail(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Fatalf("trail = %q, want %q", got, want)
	}
}
