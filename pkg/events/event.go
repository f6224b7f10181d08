package events

import (
	"context"

	"github.com/bubbus/bub/pkg/bub"
)

// Event is implemented by every in-process agent event: the lifecycle
// events of this package and any custom event that embeds [Meta]. Events
// are pointers, so handlers can change them and [Emit] returns the changed
// value to the emitter.
type Event interface {
	// EventMeta returns the turn state, run and session the event belongs
	// to.
	EventMeta() *Meta
}

// AgentEvent is Bub's name for [Event]: a handler registered with
// On[AgentEvent] receives every event dispatched on its [Bus].
type AgentEvent = Event

// TapeEvent is an [Event] that also carries the current tape, so a handler
// can record it: embed [TapeMeta] instead of [Meta]. A handler registered
// with On[TapeEvent] receives every tape event.
type TapeEvent interface {
	Event
	// EventTape returns the tape of the session the event belongs to.
	EventTape() TapeWriter
}

// TapeWriter appends a named event entry to a session's tape (Bub's
// tape.append_event). The worker supplies the implementation; it records
// the entry through the recorder, which is the only tape writer, so an
// appended event reaches the tape with the rest of its run.
type TapeWriter interface {
	AppendEvent(ctx context.Context, name string, data map[string]any) error
}

// Stopper is implemented by events whose dispatch can end early: once
// Stopped returns true, [Emit] skips the remaining handlers.
// [LLMCallStarted] and [ToolCallStarted] stop when a handler sets a
// stopping decision; a custom event may implement it too.
type Stopper interface {
	Stopped() bool
}

// Meta is what every agent event carries. Embed it (by value) in a custom
// event type to make the type's pointer an [Event]. Its fields never appear
// in a CloudEvent payload: the run and session travel as CloudEvent
// attributes, and the state stays in the process.
type Meta struct {
	// State is the turn state, shared by reference with every hook, tool
	// and event of the turn; it is safe for concurrent use.
	State *bub.State `json:"-"`
	// RunID correlates the events, hook calls and tape entries of one run.
	RunID string `json:"-"`
	// SessionID is the session the run belongs to.
	SessionID string `json:"-"`
}

// EventMeta returns m.
func (m *Meta) EventMeta() *Meta { return m }

// TapeMeta is [Meta] plus the current tape. Embed it in a custom event to
// make the type's pointer a [TapeEvent].
type TapeMeta struct {
	Meta
	// Tape records entries on the session's tape.
	Tape TapeWriter `json:"-"`
}

// EventTape returns m.Tape.
func (m *TapeMeta) EventTape() TapeWriter { return m.Tape }
