package worker

import (
	"context"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
)

func newRunTape(t *testing.T) *runTape {
	t.Helper()
	state := bub.NewState(nil)
	r := &runTape{
		bus:     &events.Bus{},
		meta:    events.Meta{State: state, RunID: "run1", SessionID: "s"},
		fork:    tape.NewFork(tape.NewMemoryStore()),
		session: "s",
	}
	r.tape = tape.New(r.fork, "s", tape.Context{State: state})
	r.bus.OnEmitted(r.record)
	return r
}

// The run's events reach its own view of the tape when it reads it — and
// only then: emitting costs no mapping.
func TestRunTapeAppliesEventsWhenRead(t *testing.T) {
	r := newRunTape(t)
	ctx := t.Context()
	if err := r.EnsureBootstrapAnchor(ctx); err != nil {
		t.Fatal(err)
	}
	text := "hi there"
	if _, err := events.Emit(ctx, r.bus, &events.ChatFinished{
		Meta:         r.meta,
		NewMessages:  []llm.Message{{Role: "user", Content: llm.Text("hello")}},
		ResponseText: &text,
	}); err != nil {
		t.Fatal(err)
	}
	if ix, err := r.fork.Index(ctx, "s"); err != nil || ix.Entries != 2 {
		t.Fatalf("fork before any read: %+v %v, want only the bootstrap anchor's 2 entries applied", ix, err)
	}
	msgs, err := r.ReadMessages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Role != "user" || msgs[1].Role != "assistant" {
		t.Fatalf("messages %+v, want the user message and the reply", msgs)
	}
	info, err := r.Info(ctx)
	if err != nil || info.Anchors != 1 || info.LastAnchor != "session/start" {
		t.Fatalf("info %+v %v", info, err)
	}
}

// A handoff or reset whose data the recorder would dead-letter is refused
// with an invalid-input error before anything is emitted, so the run's own
// view and the recorded tape never disagree about it.
func TestRunTapeRefusesATapeEventOfTheWrongShape(t *testing.T) {
	r := newRunTape(t)
	ctx := t.Context()
	var emitted int
	r.bus.OnEmitted(func(context.Context, events.Event) { emitted++ })
	for _, c := range []struct {
		name string
		data map[string]any
	}{
		{taperec.EventHandoff, map[string]any{"name": "phase-1", "state": "the summary"}},
		{taperec.EventHandoff, map[string]any{"name": 7}},
		{taperec.EventReset, map[string]any{"archive": "yes"}},
	} {
		err := r.AppendEvent(ctx, c.name, c.data)
		if bub.AsError(err).Kind != bub.KindInvalidInput || !strings.Contains(err.Error(), "want") {
			t.Errorf("AppendEvent(%s, %v) = %v, want an invalid-input error naming the field", c.name, c.data, err)
		}
	}
	if emitted != 0 {
		t.Fatalf("%d events emitted, want none", emitted)
	}
	if err := r.AppendEvent(ctx, taperec.EventHandoff, map[string]any{"name": "phase-1", "state": map[string]any{"summary": "ok"}}); err != nil {
		t.Fatal(err)
	}
	if emitted != 1 {
		t.Fatalf("%d events emitted, want the valid handoff", emitted)
	}
}
