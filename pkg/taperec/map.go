package taperec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// Names of the custom tape events with a special meaning.
const (
	// EventHandoff records an anchor plus a "handoff" event (Bub's
	// handoff); its data is {name, state}.
	EventHandoff = "handoff"
	// EventReset empties the tape before the rest of the run's entries and
	// hands off tape.BootstrapAnchor (Bub's tape.reset); its data is
	// {archive: bool}. The recorder adds the archive location to the
	// anchor state as "archived".
	EventReset = "tape.reset"
)

// Watermark keys the recorder maintains in every tape's index.
const (
	// WatermarkEvents is an events-stream sequence up to which the tape
	// holds the session's runs: every run of the session that finished
	// (run.finished or command.finished) at or before it is committed.
	// Workers wait for it before a turn (read-your-writes).
	WatermarkEvents = "events"
)

// Batch is what one event contributes to its run's tape entries.
type Batch struct {
	Entries []tape.Entry
	// Reset empties the tape before Entries; Archive keeps a copy first.
	Reset, Archive bool
}

// Writer is where [Batch.Apply] writes: a tape store, or a run's fork of
// one.
type Writer interface {
	tape.Appender
	tape.Resetter
}

// Apply writes the batch to tape name of w: the reset first when it
// resets, then its entries (a local copy of a run's tape; the archive of
// a reset is the recorder's alone).
func (b Batch) Apply(ctx context.Context, w Writer, name string) error {
	if b.Reset {
		if err := w.Reset(ctx, name); err != nil {
			return err
		}
	}
	if len(b.Entries) == 0 {
		return nil
	}
	_, err := w.Append(ctx, name, b.Entries, tape.WithoutResult())
	return err
}

// MapEvent is [Map] of an in-process event's typed payload
// (events.Typed: no JSON round trip): what a run's local TapeRecorder
// applies to its own view of the tape. The entries equal Map's of the
// decoded CloudEvent once normalized, as every store normalizes what it
// appends (values of type any in their JSON form). An event type that is
// not registered (no wire form) gives an empty batch.
func MapEvent(ev events.Event, runID string, at time.Time) (Batch, error) {
	_, payload, err := events.Typed(ev)
	if errors.Is(err, events.ErrUnregistered) {
		return Batch{}, nil
	}
	if err != nil {
		return Batch{}, err
	}
	return Map(payload, runID, at), nil
}

// Map returns the entries the TapeRecorder writes for an event payload
// (as decoded by events.DecodePayload), stamped with the run id and the
// event time. Events the recorder does not record give an empty batch; a
// handoff or reset with a value of the wrong type gives its zero value
// (see [Check]). Content keeps only its text parts (tape.StripMedia:
// images and audio never reach the tape), for the recorder's commit as
// for a run's fork.
func Map(payload any, runID string, at time.Time) Batch {
	b := mapPayload(payload, runID, at)
	for i, e := range b.Entries {
		b.Entries[i] = tape.StripMedia(e)
	}
	return b
}

func mapPayload(payload any, runID string, at time.Time) Batch {
	meta := map[string]any{"run_id": runID}
	date := tape.FormatDate(at)
	ev := func(name string, data map[string]any, m map[string]any) Batch {
		e := tape.Event(name, data, m)
		e.Date = date
		return Batch{Entries: []tape.Entry{e}}
	}
	switch p := payload.(type) {
	case *events.RunStartedData:
		data := map[string]any{"model": p.Model, "prompt": contentValue(p.Prompt), "allowed_skills": p.Metadata.AllowedSkills, "allowed_tools": nil}
		if p.Metadata.AllowedTools != nil {
			data["allowed_tools"] = p.Metadata.AllowedTools
		}
		return ev("loop.start", data, meta)
	case *events.StepStartedData:
		return ev("loop.step.start", map[string]any{"step": p.Step, "prompt": contentValue(p.Prompt)}, meta)
	case *events.StepFinishedData:
		data := map[string]any{"step": p.Step, "elapsed_ms": p.ElapsedMS, "status": p.Status, "date": date}
		if p.Error != nil {
			data["error"] = p.Error.Message
		}
		return ev("loop.step", data, meta)
	case *events.ChatFinishedData:
		ctxErr, stepErr := bubError(p.ContextError), bubError(p.Error)
		if stepErr == nil {
			stepErr = ctxErr // the payload omits the error when it is the context error
		}
		entries := tape.ChatEntries(tape.ChatRecord{
			RunID:        runID,
			SystemPrompt: p.SystemPrompt,
			ContextError: ctxErr,
			NewMessages:  p.NewMessages,
			ToolCalls:    p.ToolCalls,
			ToolResults:  p.ToolResults,
			Error:        stepErr,
			ResponseText: p.ResponseText,
			Provider:     p.Provider,
			Model:        p.Model,
			Usage:        p.Usage,
			Date:         at,
		})
		return Batch{Entries: entries}
	case *events.CommandFinishedData:
		return ev("command", map[string]any{
			"raw": p.Command, "name": p.Name, "status": p.Status,
			"elapsed_ms": p.ElapsedMS, "output": p.Output, "date": date,
		}, meta)
	case *events.RunFinishedData:
		data := map[string]any{"status": p.Status, "steps": p.Steps, "duration_ms": p.DurationMS}
		if p.Error != nil {
			data["error"] = p.Error.Message
		}
		return ev("loop.finish", data, meta)
	case *events.HookDecisionData:
		data := map[string]any{"plugin": p.Plugin, "remote": p.Remote, "hook": p.Hook, "action": p.Action, "duration_ms": p.DurationMS}
		if p.Detail != nil {
			data["detail"] = p.Detail
		}
		if p.Error != nil {
			data["error"] = p.Error.Message
		}
		return ev("hook.decision", data, map[string]any{"run_id": runID, "context": false})
	case *events.TapeEventData:
		return tapeEvent(p, meta, date)
	case *events.ApprovalRequestedData:
		data := map[string]any{"id": p.ID, "tool": p.Tool, "call_id": p.CallID, "arguments": p.Arguments, "reason": p.Reason,
			"timeout_ms": p.TimeoutMS, "deadline": p.Deadline, "default": string(p.Default), "envelope_id": p.EnvelopeID}
		return ev("approval.requested", data, map[string]any{"run_id": runID, "context": false})
	case *events.ApprovalAnsweredData:
		data := map[string]any{"id": p.ID, "tool": p.Tool, "call_id": p.CallID, "decision": p.Decision, "reason": p.Reason, "by": p.By, "at": p.At}
		return ev("approval.answered", data, map[string]any{"run_id": runID, "context": false})
	case *events.ApprovalTimedOutData:
		data := map[string]any{"id": p.ID, "tool": p.Tool, "call_id": p.CallID, "default": string(p.Default), "deadline": p.Deadline}
		return ev("approval.timed_out", data, map[string]any{"run_id": runID, "context": false})
	}
	return Batch{}
}

func tapeEvent(p *events.TapeEventData, meta map[string]any, date string) Batch {
	stamp := func(es ...tape.Entry) []tape.Entry {
		for i := range es {
			es[i].Date = date
		}
		return es
	}
	switch p.Name {
	case EventHandoff:
		name, state, _ := handoffData(p.Data)
		return Batch{Entries: stamp(tape.HandoffEntries(name, state, []map[string]any{meta})...)}
	case EventReset:
		archive, _ := resetData(p.Data)
		start := tape.HandoffEntries(tape.BootstrapAnchor, tape.BootstrapState(), []map[string]any{meta})
		return Batch{Reset: true, Archive: archive, Entries: stamp(start...)}
	}
	data := p.Data
	if data == nil {
		data = map[string]any{}
	}
	return Batch{Entries: stamp(tape.Event(p.Name, data, meta))}
}

// ErrInvalidData: a handoff or reset tape event whose data holds a value
// of the wrong type (see [Check]).
var ErrInvalidData = errors.New("tape event data of the wrong type")

// Check reports a payload [Map] cannot record as it was meant: a handoff
// whose name is not a string or whose state is not an object, a reset
// whose archive is not a bool (absent or null is the zero value). Map
// records the zero value instead — an anchor without its name, a handoff
// without its state (what the later context starts from), a reset that
// archives nothing — so the recorder dead-letters such an event rather
// than record it. Every other payload passes.
func Check(payload any) error {
	p, ok := payload.(*events.TapeEventData)
	if !ok {
		return nil
	}
	return CheckEvent(p.Name, p.Data)
}

// CheckEvent is [Check] for the tape event name with data, before it is
// emitted: what a TapeWriter's AppendEvent refuses.
func CheckEvent(name string, data map[string]any) error {
	var err error
	switch name {
	case EventHandoff:
		_, _, err = handoffData(data)
	case EventReset:
		_, err = resetData(data)
	}
	if err != nil {
		return fmt.Errorf("taperec: %s event: %w", name, err)
	}
	return nil
}

// handoffData returns the name and state of a handoff, each the zero value
// when it has the wrong type, and an [ErrInvalidData] error then.
func handoffData(data map[string]any) (name string, state map[string]any, err error) {
	err = errors.Join(field(data, "name", &name, "a string"), field(data, "state", &state, "an object"))
	return name, state, err
}

// resetData returns whether a reset archives the tape (false when archive
// has the wrong type, with an [ErrInvalidData] error).
func resetData(data map[string]any) (archive bool, err error) {
	err = field(data, "archive", &archive, "a bool")
	return archive, err
}

// field sets *dst to data[key] (see [asJSON]), or reports that it is not
// want.
func field[T any](data map[string]any, key string, dst *T, want string) error {
	if v := data[key]; !asJSON(v, dst) {
		return fmt.Errorf("%w: %s is %s, want %s", ErrInvalidData, key, jsonType(v), want)
	}
	return nil
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a bool"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a value of type %T", v)
}

// asJSON sets *dst to v as a decoded event holds it: v itself when it has
// dst's type (always, for a decoded event), else v's JSON decoded into dst
// (an in-process event's typed value). It reports false, leaving dst its
// zero value, when v does not decode into it; nil (absent) leaves the zero
// value too, and is not an error.
func asJSON[T any](v any, dst *T) bool {
	if t, ok := v.(T); ok {
		*dst = t
		return true
	}
	if v == nil {
		return true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var t T
	if json.Unmarshal(b, &t) != nil {
		return false
	}
	*dst = t
	return true
}

// contentValue is a prompt as Bub stores it: the text, or the part list.
func contentValue(c llm.Content) any {
	if c.Parts != nil {
		return c.Parts
	}
	return c.Text
}

func bubError(e *events.ErrorData) *bub.Error {
	if e == nil {
		return nil
	}
	return &bub.Error{Kind: bub.Kind(e.Kind), Message: e.Message, Details: e.Details}
}
