package taperec

import (
	"testing"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// FuzzMap feeds arbitrary structured CloudEvents through what the
// recorder does with each (events.Decode, events.DecodePayload, Check,
// Map, Batch.Apply): nothing may panic, and a store takes every batch
// Check passes. The seeds are one event of each kind Map records.
func FuzzMap(f *testing.F) {
	meta := events.Meta{RunID: "r1", SessionID: "s1"}
	text := "hi"
	for _, ev := range []events.Event{
		&events.RunStarted{Meta: meta, Prompt: llm.Text("hello"), Model: "echo:echo"},
		&events.StepStarted{Meta: meta, Step: 1, Prompt: llm.Text("hello")},
		&events.ChatFinished{Meta: meta, NewMessages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hello")}}, ResponseText: &text},
		&events.StepFinished{Meta: meta, Step: 1, Status: events.StepOK},
		&events.RunFinished{Meta: meta, Status: events.RunOK, Steps: 1},
		&events.CommandFinished{Meta: meta, Command: ",help", Name: "help", Status: "ok"},
		&events.HookDecision{Meta: meta, Plugin: "policy", Hook: "before_tool_call", Action: "block"},
		&events.TapeEventRecorded{Meta: meta, Name: EventHandoff, Data: map[string]any{"name": "phase-1", "state": map[string]any{"summary": "x"}}},
		&events.TapeEventRecorded{Meta: meta, Name: EventReset, Data: map[string]any{"archive": true}},
		&events.TapeEventRecorded{Meta: meta, Name: "order.reviewed", Data: map[string]any{"order": 7.0}},
		&events.ApprovalRequested{Meta: meta, ID: "a1", Reason: "rm -rf"},
	} {
		ce, err := events.ToCloudEvent(ev, events.Attrs{Source: "/bub/worker/fuzz", Seq: 1})
		if err != nil {
			f.Fatal(err)
		}
		body, err := events.Encode(ce)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	header := map[string][]string{"Content-Type": {events.ContentTypeStructured}}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := events.Decode(header, body)
		if err != nil {
			return
		}
		payload, err := events.DecodePayload(ev)
		if err != nil || Check(payload) != nil {
			return
		}
		b := Map(payload, events.RunID(ev), ev.Time())
		if err := b.Apply(t.Context(), tape.NewMemoryStore(), "fuzz"); err != nil {
			t.Fatalf("the batch of %s: %v", body, err)
		}
	})
}
