package events_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// BenchmarkEmit measures in-process dispatch: every LLM and tool call
// emits, so a bus with nothing registered for an event must cost next to
// nothing and allocate nothing.
func BenchmarkEmit(b *testing.B) {
	ctx := context.Background()
	ev := &events.ToolCallFinished{Meta: events.Meta{State: bub.NewState(nil), RunID: "r"}, Result: &tools.Result{}}
	cases := []struct {
		name  string
		setup func(*events.Bus)
	}{
		{"empty", func(*events.Bus) {}},
		{"8 other types", func(bus *events.Bus) {
			for range 8 {
				events.On(bus, func(context.Context, *events.StepStarted) error { return nil })
			}
		}},
		{"1 matching", func(bus *events.Bus) {
			events.On(bus, func(context.Context, *events.ToolCallFinished) error { return nil })
		}},
		{"interface + concrete + sink", func(bus *events.Bus) {
			events.On(bus, func(context.Context, events.AgentEvent) error { return nil })
			events.On(bus, func(context.Context, *events.ToolCallFinished) error { return nil })
			bus.OnEmitted(func(context.Context, events.Event) {})
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var bus events.Bus
			tc.setup(&bus)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := events.Emit(ctx, &bus, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublish is P7: publishing one lifecycle event as a CloudEvent
// through the Bridge ("bridge": convert, build with New, encode, publish,
// collect the ack) beside the floor ("raw": MarshalJSON of a prebuilt
// CloudEvent and js.PublishAsync of the bytes, waiting for room when 4000
// are pending). "build+raw" builds the event with ToCloudEvent and ToMsg
// and publishes it without the bridge, which separates the cost of
// building a CloudEvent from the bridge's own. All wait for every
// acknowledgement at the end. Goal: bridge ≤ 1.5 × raw. cpu-ns/op is the
// process's CPU time per event (server included), steadier than wall time
// on a shared machine.
func BenchmarkPublish(b *testing.B) {
	s := natstest.Start(b)
	_, js := s.JetStream(b)
	names := subjects.Default()
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: names.EventsStream(), Subjects: []string{names.EventsAll()},
		Storage: jetstream.MemoryStorage, MaxMsgs: 200_000, Discard: jetstream.DiscardOld,
	})
	if err != nil {
		b.Fatal(err)
	}
	purge := func(b *testing.B) {
		if err := stream.Purge(ctx); err != nil {
			b.Fatal(err)
		}
	}
	meta := events.Meta{State: bub.NewState(nil), RunID: "run-0199a1b2-0000-7000-8000-000000000001", SessionID: "telegram:42"}
	ev := &events.ToolCallFinished{Meta: meta,
		Call:   tools.Call{RunID: meta.RunID, Tool: "fs_read", CallID: "call_1", Arguments: map[string]any{"path": "pkg/events/bus.go"}},
		Result: &tools.Result{RunID: meta.RunID, Tool: "fs_read", Result: "package events\n\nimport (\n\t\"context\"\n)\n", DurationMS: 2},
	}
	source := events.Source("worker", "w1")

	b.Run("raw", func(b *testing.B) {
		e, err := events.ToCloudEvent(ev, events.Attrs{Source: source, Seq: 1})
		if err != nil {
			b.Fatal(err)
		}
		subject := names.Event(meta.SessionID, events.SubjectName(e.Type()))
		purge(b)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			body, err := e.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.PublishAsync(subject, body, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			b.Fatal("acknowledgements missing after 30s")
		}
	})

	b.Run("build+raw", func(b *testing.B) {
		subject := names.Event(meta.SessionID, events.SubjectName(events.TypeToolCallFinish))
		purge(b)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			e, err := events.ToCloudEvent(ev, events.Attrs{Source: source, Seq: 1})
			if err != nil {
				b.Fatal(err)
			}
			msg, err := events.ToMsg(subject, e)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			b.Fatal("acknowledgements missing after 30s")
		}
	})

	b.Run("bridge", func(b *testing.B) {
		br := newBridge(b, js, names)
		var bus events.Bus
		att := br.Attach(&bus)
		purge(b)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := events.Emit(ctx, &bus, ev); err != nil {
				b.Fatal(err)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := att.Flush(fctx); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkDecode is what the recorder does with each event it consumes:
// decode the message into a CloudEvent and its data into the typed
// payload, here a chat.finished with a system prompt and two messages.
func BenchmarkDecode(b *testing.B) {
	reply := "Hello! How can I help you today?"
	data := events.ChatFinishedData{
		SystemPrompt: strings.Repeat("You are a helpful assistant. ", 40),
		NewMessages: []llm.Message{
			{Role: llm.RoleUser, Content: llm.Text("hello, what can you do?")},
			{Role: llm.RoleAssistant, Content: llm.Text(reply)},
		},
		ToolResults: []any{}, ResponseText: &reply, Provider: "openai", Model: "gpt-4o",
	}
	ev, err := events.New(events.TypeChatFinished, events.Attrs{Source: "/bub/worker/w1", SessionID: "http:alice", RunID: events.NewID()}, data)
	if err != nil {
		b.Fatal(err)
	}
	msg, err := events.ToMsg("bub.events.http:alice.chat.finished", ev)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := events.Decode(msg.Header, msg.Data)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := events.DecodePayload(got); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(msg.Data)), "bytes/msg")
}
