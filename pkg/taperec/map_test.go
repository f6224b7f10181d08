package taperec

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

func describe(b Batch) string {
	var parts []string
	if b.Reset {
		parts = append(parts, "RESET")
	}
	for _, e := range b.Entries {
		d := e.Kind
		if name, ok := e.Payload["name"].(string); ok {
			d += ":" + name
		}
		if role, ok := e.Payload["role"].(string); ok {
			d += ":" + role
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, " ")
}

// TestMapMirrorsTheTapeRecorder pins what each recorded event leaves on
// the tape (Bub's TapeRecorder, in Bub's snapshot names).
func TestMapMirrorsTheTapeRecorder(t *testing.T) {
	answer := "hi"
	ctxErr := &events.ErrorData{Kind: "not_found", Message: "No anchors found in tape."}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		payload any
		want    string
	}{
		{"run started", &events.RunStartedData{Prompt: llm.Text("p"), Model: "echo:echo"}, "event:loop.start"},
		{"step started", &events.StepStartedData{Step: 1}, "event:loop.step.start"},
		{"step finished", &events.StepFinishedData{Step: 1, Status: "ok"}, "event:loop.step"},
		{"chat", &events.ChatFinishedData{SystemPrompt: "sys", NewMessages: []llm.Message{{Role: "user", Content: llm.Text("q")}}, ResponseText: &answer},
			"system message:user message:assistant event:run"},
		{"tool step", &events.ChatFinishedData{NewMessages: []llm.Message{{Role: "user", Content: llm.Text("q")}},
			ToolCalls: []llm.ToolCall{{ID: "c", Type: "function", Function: llm.FunctionCall{Name: "x", Arguments: "{}"}}}, ToolResults: []any{"r"}},
			"message:user tool_call tool_result event:run"},
		{"context error", &events.ChatFinishedData{ContextError: ctxErr}, "error event:run"},
		{"command", &events.CommandFinishedData{Command: "help", Name: "help", Status: "ok"}, "event:command"},
		{"run finished", &events.RunFinishedData{Status: "ok", Steps: 1}, "event:loop.finish"},
		{"decision", &events.HookDecisionData{Plugin: "policy", Hook: "before_tool_call", Action: "deny"}, "event:hook.decision"},
		{"custom", &events.TapeEventData{Name: "order.reviewed", Data: map[string]any{"id": "A1"}}, "event:order.reviewed"},
		{"handoff", &events.TapeEventData{Name: EventHandoff, Data: map[string]any{"name": "phase-1"}}, "anchor:phase-1 event:handoff"},
		{"reset", &events.TapeEventData{Name: EventReset, Data: map[string]any{"archive": true}}, "RESET anchor:session/start event:handoff"},
		{"not recorded", &events.LLMCallStartedData{Model: "m"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Map(tc.payload, "run-1", at)
			if got := describe(b); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, e := range b.Entries {
				if e.Meta["run_id"] != "run-1" || e.Date != tape.FormatDate(at) {
					t.Fatalf("entry %+v lacks the run id or the event time", e)
				}
			}
		})
	}
	ctx := Map(&events.ChatFinishedData{ContextError: ctxErr}, "run-1", at)
	if status := ctx.Entries[len(ctx.Entries)-1].Payload["data"].(map[string]any)["status"]; status != "error" {
		t.Fatalf("a context error recorded run status %v, want error", status)
	}
	if d := Map(&events.HookDecisionData{Plugin: "p"}, "run-1", at).Entries[0]; d.InContext() {
		t.Fatal("hook decisions must stay out of the model context")
	}
}

// TestMapEventMatchesTheRecorder: what a run's local recorder applies
// (MapEvent of the in-process event, no JSON round trip) is what the
// recorder commits (Map of the payload decoded from the published
// CloudEvent), entry for entry once a store normalized both: typed values
// in fields of type any (a tool result struct, a handoff state of another
// map type, integers) included.
func TestMapEventMatchesTheRecorder(t *testing.T) {
	type result struct {
		Path  string `json:"path"`
		Lines int    `json:"lines"`
	}
	answer := "done"
	meta := events.Meta{RunID: "run-1", SessionID: "s"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []events.Event{
		&events.RunStarted{Meta: meta, Prompt: llm.Content{Parts: []llm.Part{{Type: "text", Text: "look"}}}, Model: "m",
			Metadata: events.RunMetadata{AllowedTools: []string{"bash"}, AllowedSkills: []any{"x", 2}}},
		&events.StepStarted{Meta: meta, Step: 1, Prompt: llm.Text("p")},
		&events.ChatFinished{Meta: meta, SystemPrompt: "sys", NewMessages: []llm.Message{{Role: "user", Content: llm.Text("q")}},
			ToolCalls:   []llm.ToolCall{{ID: "c", Type: "function", Function: llm.FunctionCall{Name: "fs_read", Arguments: `{"path":"a"}`}}},
			ToolResults: []any{result{Path: "a", Lines: 3}, errors.New("boom"), 7}, ResponseText: &answer},
		&events.ChatFinished{Meta: meta, ContextErr: errors.New("no anchors"), Err: errors.New("no anchors")},
		&events.StepFinished{Meta: meta, Step: 1, Status: "ok", ElapsedMS: 12},
		&events.HookDecision{Meta: meta, Plugin: "policy", Hook: "before_tool_call", Action: "deny", Detail: map[string]any{"r": result{Path: "b"}}, DurationMS: 1},
		&events.TapeEventRecorded{Meta: meta, Name: EventHandoff, Data: map[string]any{"name": "phase-1", "state": map[string]string{"owner": "human"}}},
		&events.TapeEventRecorded{Meta: meta, Name: EventReset, Data: map[string]any{"archive": true}},
		&events.TapeEventRecorded{Meta: meta, Name: "order.reviewed", Data: map[string]any{"n": int64(1) << 40, "r": result{Path: "c"}}},
		&events.CommandFinished{Meta: meta, Command: ",help", Name: "help", Status: "ok", Output: "…", ElapsedMS: 3},
		&events.RunFinished{Meta: meta, Status: events.RunError, Steps: 2, DurationMS: 40, Err: errors.New("x")},
	}
	ctx := t.Context()
	local, committed := tape.NewMemoryStore(), tape.NewMemoryStore()
	for i, ev := range evs {
		b, err := MapEvent(ev, meta.RunID, at)
		if err != nil {
			t.Fatal(err)
		}
		e, err := events.ToCloudEvent(ev, events.Attrs{Source: events.Source("worker", "w")})
		if err != nil {
			t.Fatal(err)
		}
		payload, err := events.DecodePayload(e)
		if err != nil {
			t.Fatal(err)
		}
		want := Map(payload, meta.RunID, at)
		if len(want.Entries) == 0 || b.Reset != want.Reset || b.Archive != want.Archive {
			t.Fatalf("%T: batch %q, the recorder's %q", ev, describe(b), describe(want))
		}
		// Each event on a tape of its own, so a reset hides nothing.
		name := fmt.Sprint("t", i)
		if err := b.Apply(ctx, local, name); err != nil {
			t.Fatal(err)
		}
		if err := want.Apply(ctx, committed, name); err != nil {
			t.Fatal(err)
		}
		got, err := local.Fetch(ctx, name, tape.All())
		if err != nil {
			t.Fatal(err)
		}
		stored, err := committed.Fetch(ctx, name, tape.All())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, stored) {
			t.Errorf("%T: local entries\n%#v\nthe recorder's\n%#v", ev, got, stored)
		}
	}
	h, err := MapEvent(evs[6], meta.RunID, at)
	if err != nil {
		t.Fatal(err)
	}
	if state := h.Entries[0].Payload["state"]; !reflect.DeepEqual(state, map[string]any{"owner": "human"}) {
		t.Errorf("handoff state of another map type: %#v", state)
	}
}

// TestCheckRejectsWhatMapWouldDrop: a handoff or reset whose data holds a
// value of the wrong type is reported (Map would record its zero value: an
// anchor without its name or state, a reset that archives nothing);
// absent and null values, typed in-process values that have the right
// JSON form, and every other payload pass.
func TestCheckRejectsWhatMapWouldDrop(t *testing.T) {
	type phase string
	tapeEvent := func(name string, data map[string]any) *events.TapeEventData {
		return &events.TapeEventData{Name: name, Data: data}
	}
	for _, tc := range []struct {
		name    string
		payload any
		bad     string // in the error; "" for none
	}{
		{"handoff", tapeEvent(EventHandoff, map[string]any{"name": "phase-1", "state": map[string]any{"summary": "s"}}), ""},
		{"handoff without state", tapeEvent(EventHandoff, map[string]any{"name": "phase-1", "state": nil}), ""},
		{"handoff without data", tapeEvent(EventHandoff, nil), ""},
		{"handoff of typed values", tapeEvent(EventHandoff, map[string]any{"name": phase("p"), "state": map[string]string{"a": "b"}}), ""},
		{"handoff with a number name", tapeEvent(EventHandoff, map[string]any{"name": 42.0}), "name is a number, want a string"},
		{"handoff with a string state", tapeEvent(EventHandoff, map[string]any{"name": "p", "state": "the summary"}), "state is a string, want an object"},
		{"handoff with a list state", tapeEvent(EventHandoff, map[string]any{"name": "p", "state": []any{"x"}}), "state is an array, want an object"},
		{"reset", tapeEvent(EventReset, map[string]any{"archive": true}), ""},
		{"reset without archive", tapeEvent(EventReset, map[string]any{}), ""},
		{"reset with a string archive", tapeEvent(EventReset, map[string]any{"archive": "yes"}), "archive is a string, want a bool"},
		{"custom tape event", tapeEvent("order.reviewed", map[string]any{"name": 42.0, "state": "x", "archive": "yes"}), ""},
		{"other payload", &events.RunFinishedData{Status: "ok"}, ""},
		{"unknown type", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.payload)
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidData) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("Check = %v, want ErrInvalidData with %q", err, tc.bad)
			}
		})
	}
}

// BenchmarkApplyToFork is what a worker does with each event its run
// emits before the run next reads its tape: map it to tape entries and
// append them to the run's fork of the tape, here a chat.finished with a
// system prompt and two messages. A run's fork takes about a dozen such
// appends, so each fork here takes 16.
func BenchmarkApplyToFork(b *testing.B) {
	reply := "Hello! How can I help you today?"
	ev := &events.ChatFinished{
		Meta:         events.Meta{RunID: "run-1", SessionID: "http:alice"},
		SystemPrompt: strings.Repeat("You are a helpful assistant. ", 40),
		NewMessages: []llm.Message{
			{Role: llm.RoleUser, Content: llm.Text("hello, what can you do?")},
			{Role: llm.RoleAssistant, Content: llm.Text(reply)},
		},
		ResponseText: &reply,
	}
	parent := tape.NewMemoryStore()
	var fork *tape.Fork
	at := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%16 == 0 {
			fork = tape.NewFork(parent)
		}
		batch, err := MapEvent(ev, "run-1", at)
		if err != nil {
			b.Fatal(err)
		}
		if err := batch.Apply(b.Context(), fork, "http:alice"); err != nil {
			b.Fatal(err)
		}
	}
}
