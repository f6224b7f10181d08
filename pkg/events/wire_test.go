package events_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// The bridge's fast encoder must write exactly what New + Encode write.
func TestWireEncodingMatchesSDK(t *testing.T) {
	tricky := "quote \" backslash \\ newline \n tab \t cr \r ctrl \x01\x1f html <&> é 😀 bad \xff end"
	evs := func(meta events.Meta) []events.Event {
		return []events.Event{
			&events.RunStarted{Meta: meta, Prompt: llm.Text(tricky), Model: "openai:gpt-4o-mini",
				Metadata: events.RunMetadata{Answers: events.Answers{EnvelopeID: "e1", InboundSeq: 3}, AllowedSkills: []any{tricky}}},
			&events.ToolCallFinished{Meta: meta,
				Call:   tools.Call{RunID: meta.RunID, Tool: "fs_read", CallID: "call_1", Arguments: map[string]any{"path": tricky}},
				Result: &tools.Result{RunID: meta.RunID, Tool: "fs_read", Result: "package events\n", DurationMS: 2}},
			&events.RunFinished{Meta: meta, Status: events.RunError, Steps: 2, DurationMS: 5120, Err: bub.Errorf(bub.KindProvider, "rate <limited>")},
			&events.MessagesPending{Meta: meta, Step: 2, Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(tricky)}}},
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	metas := []events.Meta{
		{RunID: "run-0199a1b2-0000-7000-8000-000000000001", SessionID: "telegram:42"},
		{RunID: "run-2", SessionID: "odd \"session\"\ttab"},
		{},
	}
	attrs := []events.Attrs{
		{ID: "0199a1b2-c3d4-7e5f-8a9b-000000000001", Seq: 7, Time: at},
		{ID: "id-2", Time: at.Truncate(time.Second), Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "k=v"},
		{ID: "id-3", Seq: math.MaxInt32, Time: at, Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for _, source := range []string{events.Source("worker", "w1"), "/bub/worker/host name", "https://example.com/x?y=1"} {
		for _, meta := range metas {
			for _, ev := range evs(meta) {
				for _, a := range attrs {
					a.Source = source
					want, err := events.ToCloudEvent(ev, a)
					if err != nil {
						t.Fatal(err)
					}
					wantBody, err := events.Encode(want)
					if err != nil {
						t.Fatal(err)
					}
					typ, data, err := events.Typed(ev)
					if err != nil {
						t.Fatal(err)
					}
					a.RunID, a.SessionID = meta.RunID, meta.SessionID
					got, ok, err := events.WireEncode(source, typ, a, data)
					if err != nil || !ok {
						t.Fatalf("%s: fast path ok=%v err=%v", typ, ok, err)
					}
					if !bytes.Equal(got, wantBody) {
						t.Errorf("%s (source %q, session %q):\n got %s\nwant %s", typ, source, meta.SessionID, got, wantBody)
					}
				}
			}
		}
	}
}

// Where New would change a value (trimming, int32 seq), the bridge takes
// the slow path.
func TestWireEncodingFallsBack(t *testing.T) {
	at := time.Now()
	for _, a := range []events.Attrs{
		{ID: " id", Time: at},
		{ID: "id", SessionID: "s ", Time: at},
		{ID: "id", Seq: math.MaxInt32 + 1, Time: at},
		{ID: "id"},
	} {
		if _, ok, _ := events.WireEncode(events.Source("worker", "w"), events.TypeRunStarted, a, struct{}{}); ok {
			t.Errorf("%+v: fast path taken", a)
		}
	}
	if _, ok, _ := events.WireEncode("", events.TypeRunStarted, events.Attrs{ID: "id", Time: at}, struct{}{}); ok {
		t.Error("empty source: fast path taken")
	}
}

// TestTypedIsTheDecodedPayload: Typed gives a pointer to the type
// DecodePayload gives for the published CloudEvent, and it is the same
// document: its JSON is the CloudEvent's data, and decoding that gives
// what DecodePayload gives.
func TestTypedIsTheDecodedPayload(t *testing.T) {
	meta := events.Meta{RunID: "run-1", SessionID: "telegram:42"}
	evs := append(allEvents(meta),
		&events.RunStarted{Meta: meta, Prompt: llm.Text("hi <there>"), Model: "m", Metadata: events.RunMetadata{Answers: events.Answers{InboundSeq: 7}, AllowedTools: []string{"bash"}, AllowedSkills: []any{"x"}}},
		&events.ToolCallFinished{Meta: meta, Call: tools.Call{Tool: "bash", Arguments: map[string]any{"cmd": "ls"}},
			Result: &tools.Result{Tool: "bash", Result: map[string]any{"out": []any{1, "x"}}, DurationMS: 2}},
		&events.RunFinished{Meta: meta, Status: events.RunError, Err: bub.Errorf(bub.KindProvider, "rate limited")},
		&events.TapeEventRecorded{Meta: meta, Name: "handoff", Data: map[string]any{"name": "session/start", "state": map[string]any{"owner": "human"}}},
	)
	for _, ev := range evs {
		e, err := events.ToCloudEvent(ev, events.Attrs{Source: events.Source("worker", "w")})
		if err != nil {
			t.Fatal(err)
		}
		want, err := events.DecodePayload(e)
		if err != nil {
			t.Fatal(err)
		}
		typ, got, err := events.Typed(ev)
		if err != nil || typ != e.Type() {
			t.Fatalf("Typed: %q, %v (want type %q)", typ, err, e.Type())
		}
		if reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Fatalf("%s: Typed gives %T, DecodePayload %T", typ, got, want)
		}
		raw, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, e.Data()) {
			t.Errorf("%s: JSON\n got %s\nwant %s", typ, raw, e.Data())
		}
		decoded := reflect.New(reflect.TypeOf(got).Elem()).Interface()
		if err := json.Unmarshal(raw, decoded); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(decoded, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", typ, decoded, want)
		}
	}
}

func BenchmarkLocalRecord(b *testing.B) {
	meta := events.Meta{RunID: "run-1", SessionID: "telegram:42"}
	ev := &events.ToolCallFinished{Meta: meta, Call: tools.Call{Tool: "fs_read", CallID: "call_1", Arguments: map[string]any{"path": "pkg/events/bus.go"}},
		Result: &tools.Result{Tool: "fs_read", Result: "package events\n", DurationMS: 2}}
	b.Run("ToCloudEvent+DecodePayload", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, err := events.ToCloudEvent(ev, events.Attrs{Source: "/bub/worker/w", SessionID: meta.SessionID, RunID: meta.RunID})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := events.DecodePayload(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := events.Typed(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
