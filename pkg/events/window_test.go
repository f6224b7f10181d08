package events_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestEmitWithDoneCtxWithinWindowIsPublished (failed before the fix): Bridge.publish
// (nats_bridge.go, the select on b.slots and ctx.Done()) takes a window
// slot in a select whose other case is ctx.Done(). When the window has room
// AND the emit's ctx is already done, both cases are ready and Go picks one
// at random, so about half of such events are not published at all (Flush
// reports "waiting for the in-flight window: context canceled") although
// nothing had to wait. This is exactly what happens to the events a run
// emits after its ctx was cancelled (a ,quit, a turn deadline): the
// StepFinished{error}, the ToolCallFinished of running tools, the
// ChatFinished the recorder builds the tape from — each is randomly
// present or missing from the stream.
//
// Interleaving: idle bridge (window of 512 free), ctx cancelled, Emit x32.
// Expected (Bridge doc: "an emit beyond [MaxInFlight] waits for room
// (back-pressure) or for its ctx"; TestBridgeWindowAndAcks only expects the
// give-up when "the window is full"): an emit that finds room publishes,
// so all 32 events are stored with seq 1..32 and Flush returns nil.
func TestEmitWithDoneCtxWithinWindowIsPublished(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	stream := createEventsStream(t, js, names)
	br := newBridge(t, js, names)
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	const n = 32
	meta := events.Meta{RunID: "r", SessionID: "s"}
	for step := range n {
		if _, err := events.Emit(cancelled, &bus, &events.StepStarted{Meta: meta, Step: step + 1}); err != nil {
			t.Fatal(err)
		}
	}
	ferr := att.Flush(ctx)
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ferr != nil || info.State.Msgs != n {
		first, _, _ := strings.Cut(fmt.Sprint(ferr), "\n")
		t.Fatalf("with room in the window, %d of %d events emitted with a done ctx were stored; Flush reports %d failures, first: %s",
			info.State.Msgs, n, strings.Count(fmt.Sprint(ferr), "context canceled"), first)
	}
}
