package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// createEventsStream creates the events stream as the lead's topology
// does: every subject under names.EventsAll().
func createEventsStream(t testing.TB, js jetstream.JetStream, names subjects.Names) jetstream.Stream {
	t.Helper()
	st, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: names.EventsStream(), Subjects: []string{names.EventsAll()}, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newBridge(t testing.TB, js jetstream.JetStream, names subjects.Names, opts ...events.BridgeOption) *events.Bridge {
	t.Helper()
	br, err := events.NewBridge(js, names, events.Source("worker", "w1"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = br.Close(ctx)
	})
	return br
}

func withDeadline(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestBridgePublishes: an independent core-NATS subscriber on
// bub.events.> sees every published event, after the local handlers
// changed it, with its type, session, extensions and per-run order.
func TestBridgePublishes(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	stream := createEventsStream(t, js, names)

	observer := s.Conn(t)
	sub, err := observer.SubscribeSync(names.EventsAll())
	if err != nil {
		t.Fatal(err)
	}
	if err := observer.Flush(); err != nil {
		t.Fatal(err)
	}

	var reg events.Registry
	if err := events.RegisterType[*reviewed](&reg, "com.example.order.reviewed.v1"); err != nil {
		t.Fatal(err)
	}
	br := newBridge(t, js, names, events.WithCodec(events.Codec{Registry: &reg}),
		events.WithTraceContext(func(context.Context) (string, string) { return testTraceparent, "bub=1" }))
	var bus events.Bus
	att := br.Attach(&bus)
	events.On(&bus, func(_ context.Context, ev *events.ToolCallStarted) error {
		ev.Decision = tools.Deny("not today")
		return nil
	})

	const session = "telegram:42 a.b"
	meta := events.Meta{State: bub.NewState(nil), RunID: "run-1", SessionID: session}
	ctx := withDeadline(t)
	emitted := []events.Event{
		&events.RunStarted{Meta: meta, Prompt: llm.Text("hi"), Model: "echo:echo"},
		&events.StepStarted{Meta: meta, Step: 1},
		&events.ToolCallStarted{Meta: meta, Call: tools.Call{Tool: "bash"}},
		&localOnly{Meta: meta}, // not registered: stays in the process
		&reviewed{Meta: meta, OrderID: "A1"},
		&events.ToolCallFinished{Meta: meta, Call: tools.Call{Tool: "bash"}, Result: &tools.Result{Result: "x"}},
		&events.ChatFinished{Meta: meta},
		&events.RunFinished{Meta: meta, Status: events.RunOK, Steps: 1},
	}
	for _, ev := range emitted {
		if _, err := events.Emit(ctx, &bus, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := att.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 7 {
		t.Fatalf("stream holds %v messages (%v), want 7 acknowledged before Flush returned", info.State.Msgs, err)
	}

	wantTypes := []string{events.TypeRunStarted, events.TypeStepStarted, events.TypeToolCallStarted, "com.example.order.reviewed.v1",
		events.TypeToolCallFinish, events.TypeChatFinished, events.TypeRunFinished}
	for i, typ := range wantTypes {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
		e, err := events.FromMsg(msg)
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
		if e.Type() != typ || msg.Subject != names.Event(session, events.SubjectName(typ)) {
			t.Fatalf("event %d: type %s on %s, want %s", i+1, e.Type(), msg.Subject, typ)
		}
		if e.Subject() != session || events.SessionID(e) != session || events.RunID(e) != "run-1" || events.Seq(e) != int64(i+1) ||
			e.Extensions()[events.ExtPartitionKey] != session || e.Source() != "/bub/worker/w1" {
			t.Fatalf("event %d attributes: %s", i+1, e)
		}
		if tp, ts := events.Traceparent(e); tp != testTraceparent || ts != "bub=1" || msg.Header.Get(subjects.HeaderTraceparent) != testTraceparent {
			t.Fatalf("event %d trace context: %q %q", i+1, tp, ts)
		}
		if msg.Header.Get(subjects.HeaderMsgID) != e.ID() {
			t.Fatalf("event %d: Nats-Msg-Id %q, id %q", i+1, msg.Header.Get(subjects.HeaderMsgID), e.ID())
		}
		if typ == events.TypeToolCallStarted {
			if p := decodeAs[*events.ToolCallStartedData](t, e); p.Decision == nil || p.Decision.Action != tools.ActionDeny {
				t.Fatalf("published tool_call.started lacks the handler's decision: %s", e.Data())
			}
		}
	}
}

// TestBridgeFlushReportsPublishFailure: with no stream, every publish
// fails, and Flush says so — once.
// TestBridgeFlushReportsPublishFailure: with no stream to store them
// until the ack timeout, Flush reports the publishes as not
// acknowledged, with the last attempt's error, once.
func TestBridgeFlushReportsPublishFailure(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	br := newBridge(t, js, subjects.Default(), events.WithAckTimeout(time.Second))
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)
	for step := range 3 {
		if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: events.Meta{RunID: "r", SessionID: "s"}, Step: step + 1}); err != nil {
			t.Fatal(err)
		}
	}
	err := att.Flush(ctx)
	if !errors.Is(err, jetstream.ErrNoStreamResponse) || !errors.Is(err, events.ErrAckTimeout) {
		t.Fatalf("Flush = %v, want not acknowledged after no stream response", err)
	}
	if err := att.Flush(ctx); err != nil {
		t.Fatalf("second Flush = %v, want nil: errors are reported once", err)
	}
	if err := br.Flush(ctx); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("Bridge.Flush = %v, want the same failures", err)
	}
}

// TestBridgeRefusesEventsTooLargeForTheServer: on a server that takes
// messages of at most 64 KiB, an event that would leave less than
// EntryReserve of it (a 62 KiB prompt) is not published: Flush reports
// it once, wrapping nats.ErrMaxPayload and naming the type and both
// sizes, and it takes no sequence number, so the run's events on the
// stream stay numbered 1, 2 without a gap.
func TestBridgeRefusesEventsTooLargeForTheServer(t *testing.T) {
	s := natstest.StartWithOptions(t, &server.Options{MaxPayload: 64 << 10})
	_, js := s.JetStream(t)
	names := subjects.Default()
	stream := createEventsStream(t, js, names)
	br := newBridge(t, js, names)
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)
	for i, prompt := range []string{"small", strings.Repeat("p", 62<<10), "small again"} {
		if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: events.Meta{RunID: "r", SessionID: "s"}, Step: i + 1, Prompt: llm.Text(prompt)}); err != nil {
			t.Fatal(err)
		}
	}
	err := att.Flush(ctx)
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("Flush = %v, want nats.ErrMaxPayload", err)
	}
	for _, want := range []string{events.TypeStepStarted, "max_payload (65536 bytes)", fmt.Sprintf("less %d", events.EntryReserve)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Flush = %q, want it to name %q", err, want)
		}
	}
	if err := att.Flush(ctx); err != nil {
		t.Fatalf("second Flush = %v, want nil: errors are reported once", err)
	}
	var seqs []int64
	for seq := uint64(1); ; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, events.Seq(mustDecode(t, &nats.Msg{Header: raw.Header, Data: raw.Data})))
	}
	if fmt.Sprint(seqs) != "[1 2]" {
		t.Errorf("the run's events on the stream are numbered %v, want [1 2]", seqs)
	}
}

// TestBridgeRidesOutAStreamWithoutLeader: while no server answers for the
// events stream (as while a cluster elects its leader, which outlasts
// nats.go's own retries of "no responders"), the bridge publishes each
// event again with the same id; once the stream answers, Flush succeeds
// and the stream holds every event once.
func TestBridgeRidesOutAStreamWithoutLeader(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	br := newBridge(t, js, names)
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)
	const n = 5
	for step := range n {
		if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: events.Meta{RunID: "r", SessionID: "s"}, Step: step + 1}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // nats.go's retries are over: no stream response
	stream := createEventsStream(t, js, names)
	if err := att.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v, want every event stored once its stream answers", err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != n {
		t.Fatalf("stream holds %v messages (%v), want %d", info.State.Msgs, err, n)
	}
}

// TestBridgeConcurrentRuns: runs publish concurrently, tool calls within a
// run emit concurrently; each run's events are in the stream in seq order
// 1..n, and each attachment flushes its own events.
func TestBridgeConcurrentRuns(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	stream := createEventsStream(t, js, names)
	br := newBridge(t, js, names, events.WithMaxInFlight(8))
	ctx := withDeadline(t)

	const runs, callers, perCaller = 4, 3, 40
	var wg sync.WaitGroup
	for r := range runs {
		var bus events.Bus
		att := br.Attach(&bus)
		meta := events.Meta{RunID: fmt.Sprintf("run-%d", r), SessionID: fmt.Sprintf("session-%d", r%2)}
		wg.Go(func() {
			var calls sync.WaitGroup
			for range callers {
				calls.Go(func() {
					for range perCaller {
						if _, err := events.Emit(ctx, &bus, &events.ToolCallFinished{Meta: meta, Result: &tools.Result{}}); err != nil {
							t.Error(err)
						}
					}
				})
			}
			calls.Wait()
			if err := att.Flush(ctx); err != nil {
				t.Errorf("%s: Flush: %v", meta.RunID, err)
			}
		})
	}
	wg.Wait()

	total := uint64(runs * callers * perCaller)
	lastSeq := map[string]int64{}
	for seq := uint64(1); seq <= total; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream seq %d: %v", seq, err)
		}
		e, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		run := events.RunID(e)
		if got := events.Seq(e); got != lastSeq[run]+1 {
			t.Fatalf("%s: seq %d follows %d in the stream", run, got, lastSeq[run])
		}
		lastSeq[run]++
	}
	for r := range runs {
		if n := lastSeq[fmt.Sprintf("run-%d", r)]; n != callers*perCaller {
			t.Fatalf("run-%d published %d events, want %d", r, n, callers*perCaller)
		}
	}
}

// swallow subscribes to every event subject like a stream that never
// acknowledges, and returns the received messages.
func swallow(t *testing.T, s *natstest.Server, names subjects.Names) <-chan *nats.Msg {
	t.Helper()
	nc := s.Conn(t)
	got := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe(names.EventsAll(), got); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

func receive(t *testing.T, ch <-chan *nats.Msg) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return nil
	}
}

// TestBridgeWindowAndAcks: the in-flight window blocks an emit until an
// acknowledgement frees room (or the emit's ctx ends), Flush waits for
// outstanding acknowledgements, and a negative acknowledgement surfaces.
func TestBridgeWindowAndAcks(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	published := swallow(t, s, names)
	br := newBridge(t, js, names, events.WithMaxInFlight(1), events.WithAckTimeout(time.Minute))
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)
	meta := events.Meta{RunID: "r", SessionID: "s"}

	if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: meta, Step: 1}); err != nil {
		t.Fatal(err)
	}
	first := receive(t, published)

	// The window is full: an emit whose ctx is done gives up at once.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := events.Emit(cancelled, &bus, &events.StepStarted{Meta: meta, Step: 2}); err != nil {
		t.Fatal(err) // publishing never fails the emit; Flush reports it
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := att.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with an unacknowledged event = %v, want deadline exceeded", err)
	}

	// An acknowledgement frees the window and resolves Flush, which
	// reports the event the cancelled emit could not publish.
	if err := first.Respond([]byte(`{"stream":"BUB_EVENTS","seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := att.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush = %v, want the cancelled emit's error", err)
	}

	// A negative acknowledgement is an error of that event.
	if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: meta, Step: 3}); err != nil {
		t.Fatal(err)
	}
	third := receive(t, published)
	if events.Seq(mustDecode(t, third)) != 2 {
		t.Fatalf("the unpublished event consumed a seq: %s", third.Data)
	}
	if err := third.Respond([]byte(`{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := att.Flush(ctx); err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Flush = %v, want the negative acknowledgement", err)
	}
}

func TestBridgeAckTimeout(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	published := swallow(t, s, names)
	br := newBridge(t, js, names, events.WithAckTimeout(20*time.Millisecond))
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)
	if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: events.Meta{RunID: "r", SessionID: "s"}}); err != nil {
		t.Fatal(err)
	}
	receive(t, published)
	if err := att.Flush(ctx); !errors.Is(err, events.ErrAckTimeout) {
		t.Fatalf("Flush = %v, want ack timeout", err)
	}
}

// TestRepublishIsDeduplicated: the event id is the Nats-Msg-Id, so a retry
// of the same event is stored once.
func TestRepublishIsDeduplicated(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	stream := createEventsStream(t, js, names)
	ctx := withDeadline(t)
	e, err := events.ToCloudEvent(&events.StepStarted{Meta: events.Meta{SessionID: "s"}}, events.Attrs{Source: "/bub/worker/w1"})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := range 2 {
		msg, err := events.ToMsg(names.Event("s", events.SubjectName(e.Type())), e)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate != (attempt == 1) {
			t.Fatalf("attempt %d: duplicate = %v", attempt, ack.Duplicate)
		}
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
}

func TestBridgeDetachAndClose(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	stream := createEventsStream(t, js, names)
	br := newBridge(t, js, names, events.WithCodec(events.Codec{CaptureContent: true}))
	var bus events.Bus
	att := br.Attach(&bus)
	ctx := withDeadline(t)
	meta := events.Meta{RunID: "r", SessionID: "s"}
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("captured")}}}
	if _, err := events.Emit(ctx, &bus, &events.LLMCallStarted{Meta: meta, Request: req}); err != nil {
		t.Fatal(err)
	}
	att.Detach()
	att.Detach()
	if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if err := br.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	if p := decodeAs[*events.LLMCallStartedData](t, e); len(p.Messages) != 1 {
		t.Fatalf("content capture option not applied: %s", e.Data())
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %v messages (%v), want 1: a detached bus publishes nothing", info.State.Msgs, err)
	}

	if err := br.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := br.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	att2 := br.Attach(&bus)
	if _, err := events.Emit(ctx, &bus, &events.StepStarted{Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if err := att2.Flush(ctx); !errors.Is(err, events.ErrBridgeClosed) {
		t.Fatalf("Flush after Close = %v, want bridge closed", err)
	}
}

func TestNewBridgeValidates(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	names := subjects.Default()
	for name, try := range map[string]func() (*events.Bridge, error){
		"nil JetStream": func() (*events.Bridge, error) { return events.NewBridge(nil, names, "/bub/w/1") },
		"empty source":  func() (*events.Bridge, error) { return events.NewBridge(js, names, "") },
		"zero window": func() (*events.Bridge, error) {
			return events.NewBridge(js, names, "/bub/w/1", events.WithMaxInFlight(0))
		},
		"zero ack timeout": func() (*events.Bridge, error) {
			return events.NewBridge(js, names, "/bub/w/1", events.WithAckTimeout(0))
		},
		"negative duration": func() (*events.Bridge, error) {
			return events.NewBridge(js, names, "/bub/w/1", events.WithAckTimeout(-time.Second))
		},
	} {
		if br, err := try(); err == nil {
			_ = br.Close(context.Background())
			t.Errorf("%s: NewBridge succeeded", name)
		}
	}
}

func mustDecode(t *testing.T, msg *nats.Msg) ce.Event {
	t.Helper()
	e, err := events.FromMsg(msg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
