package taperec

import (
	"context"
	"encoding/json"
	"errors"
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
	_, err := w.Append(ctx, name, b.Entries)
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
// event time. Events the recorder does not record give an empty batch.
func Map(payload any, runID string, at time.Time) Batch {
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
		var name string
		var state map[string]any
		asJSON(p.Data["name"], &name)
		asJSON(p.Data["state"], &state)
		return Batch{Entries: stamp(tape.HandoffEntries(name, state, []map[string]any{meta})...)}
	case EventReset:
		var archive bool
		asJSON(p.Data["archive"], &archive)
		start := tape.HandoffEntries(tape.BootstrapAnchor, tape.BootstrapState(), []map[string]any{meta})
		return Batch{Reset: true, Archive: archive, Entries: stamp(start...)}
	}
	data := p.Data
	if data == nil {
		data = map[string]any{}
	}
	return Batch{Entries: stamp(tape.Event(p.Name, data, meta))}
}

// asJSON sets *dst to v as a decoded event holds it: v itself when it has
// dst's type (always, for a decoded event), else v's JSON decoded into dst
// (an in-process event's typed value); dst keeps its zero value when v
// does not decode into it, as a failed type assertion would.
func asJSON[T any](v any, dst *T) {
	if t, ok := v.(T); ok {
		*dst = t
		return
	}
	if v == nil {
		return
	}
	if b, err := json.Marshal(v); err == nil {
		var t T
		if json.Unmarshal(b, &t) == nil {
			*dst = t
		}
	}
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
