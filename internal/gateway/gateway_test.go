package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// sendChannel is a channel that records every Send; fail, when set,
// decides a send's error from the number of attempts so far.
type sendChannel struct {
	name    string
	mu      sync.Mutex
	handler hooks.MessageHandler
	sent    map[string]int // successful sends by outbound id
	order   []string       // successful sends, in order
	tries   map[string]int
	fail    func(env *envelope.Envelope, try int) error
	running bool
}

func newSendChannel(name string) *sendChannel {
	return &sendChannel{name: name, sent: map[string]int{}, tries: map[string]int{}}
}

func (c *sendChannel) Name() string { return c.name }

func (c *sendChannel) Start(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = true
	return nil
}

func (c *sendChannel) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	return nil
}

func (c *sendChannel) Send(_ context.Context, env *envelope.Envelope) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return errors.New("send on a stopped channel")
	}
	c.tries[env.ID]++
	if c.fail != nil {
		if err := c.fail(env, c.tries[env.ID]); err != nil {
			return err
		}
	}
	c.sent[env.ID]++
	c.order = append(c.order, env.ID)
	return nil
}

func (c *sendChannel) sentInOrder() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.order)
}

func (c *sendChannel) sentCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[id]
}

func (c *sendChannel) triesOf(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tries[id]
}

func (c *sendChannel) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.sent))
	for k, v := range c.sent {
		out[k] = v
	}
	return out
}

// provider provides chs, remembering the handler it was given.
func provider(chs ...*sendChannel) gateway.Provider {
	return func(_ context.Context, h hooks.MessageHandler) ([]hooks.Channel, error) {
		out := make([]hooks.Channel, len(chs))
		for i, ch := range chs {
			ch.mu.Lock()
			ch.handler = h
			ch.mu.Unlock()
			out[i] = ch
		}
		return out, nil
	}
}

type env struct {
	srv   *natstest.Server
	js    jetstream.JetStream
	names subjects.Names
	topo  natsx.Topology
}

func setup(t *testing.T, topo natsx.Topology) *env {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	names := subjects.Default()
	topo.MemoryStorage = true
	if err := natsx.EnsureTopology(t.Context(), js, names, topo); err != nil {
		t.Fatal(err)
	}
	return &env{srv: srv, js: js, names: names, topo: topo}
}

// start starts a gateway instance over its own connection; it is stopped
// when the test ends unless the test stops it first.
func (e *env) start(t *testing.T, o gateway.Options) (*gateway.Gateway, *nats.Conn) {
	t.Helper()
	nc, js := e.srv.JetStream(t)
	o.NC, o.JS, o.Names, o.Topology = nc, js, e.names, e.topo
	if o.Source == "" {
		o.Source = events.Source("gateway", "test")
	}
	if o.Enabled == "" {
		o.Enabled = "all"
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = 10 * time.Millisecond
	}
	g, err := gateway.Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	return g, nc
}

// publishOutbound publishes an outbound envelope the way a worker does;
// msgID, when set, overrides the Nats-Msg-Id.
func (e *env) publishOutbound(t *testing.T, channel, session, id, msgID string) {
	t.Helper()
	e.publishEnvelope(t, &envelope.Envelope{ID: id, Content: "reply " + id, Channel: channel, SessionID: session, OutputChannel: channel}, msgID)
}

// publishEnvelope publishes out the way a worker does; msgID, when set,
// overrides the Nats-Msg-Id.
func (e *env) publishEnvelope(t *testing.T, out *envelope.Envelope, msgID string) {
	t.Helper()
	ev, err := events.New(events.TypeEnvelopeOutbound, events.Attrs{ID: out.ID, Source: events.Source("worker", "test"), SessionID: out.SessionID}, out)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.ToMsg(e.names.Outbound(out.OutputChannel, out.SessionID), ev)
	if err != nil {
		t.Fatal(err)
	}
	if msgID != "" {
		msg.Header.Set(subjects.HeaderMsgID, msgID)
	}
	if _, err := e.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
}

// settled reports whether the gateway consumer of channel has nothing
// pending or unacknowledged.
func (e *env) settled(t *testing.T, channel string) (bool, string) {
	cons, err := e.js.Consumer(t.Context(), e.names.OutboundStream(), e.names.GatewayConsumer(channel))
	if err != nil {
		return false, err.Error()
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		return false, err.Error()
	}
	return info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0,
		fmt.Sprintf("pending %d, ack pending %d, redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
}

// consumerInfo is the state of the gateway consumer of channel.
func (e *env) consumerInfo(t *testing.T, channel string) *jetstream.ConsumerInfo {
	t.Helper()
	cons, err := e.js.Consumer(t.Context(), e.names.OutboundStream(), e.names.GatewayConsumer(channel))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func (e *env) deadLetter(t *testing.T, reason string) *jetstream.RawStreamMsg {
	t.Helper()
	var raw *jetstream.RawStreamMsg
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		st, err := e.js.Stream(t.Context(), e.names.DLQStream())
		if err != nil {
			return false, err.Error()
		}
		raw, err = st.GetLastMsgForSubject(t.Context(), e.names.DLQ(reason))
		return err == nil, fmt.Sprintf("no dead letter %s: %v", reason, err)
	})
	return raw
}

func TestInboundMessageLandsOnTheInboundStream(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(ch)})
	msg := &envelope.Envelope{Content: "hello", Channel: "test", ChatID: "42"}
	if err := ch.handler(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	if msg.ID == "" {
		t.Fatal("the message got no id")
	}
	st, err := e.js.Stream(t.Context(), e.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), e.names.Inbound("test"))
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.Header.Get(subjects.HeaderMsgID); got != msg.ID {
		t.Fatalf("Nats-Msg-Id %q, want the envelope id %q", got, msg.ID)
	}
	ev, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type() != events.TypeEnvelopeInbound || ev.ID() != msg.ID || events.SessionID(ev) != "test:42" || ev.Source() != events.Source("gateway", "test") {
		t.Fatalf("event %s id %s session %s source %s", ev.Type(), ev.ID(), events.SessionID(ev), ev.Source())
	}
	var got envelope.Envelope
	if err := events.DecodeData(ev, &got); err != nil {
		t.Fatal(err)
	}
	if got.Content != "hello" || got.Channel != "test" || got.ChatID != "42" {
		t.Fatalf("envelope %+v", got)
	}

	// The same id again is accepted once (deduplicated by JetStream).
	if err := ch.handler(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("inbound stream holds %d messages, want 1", info.State.Msgs)
	}

	// Invalid envelopes and unknown channels are the channel's errors.
	if err := ch.handler(t.Context(), &envelope.Envelope{Channel: "test"}); !errors.Is(err, envelope.ErrNoContent) {
		t.Fatalf("empty message: %v", err)
	}
	if err := ch.handler(t.Context(), &envelope.Envelope{Content: "x", Channel: "other"}); !errors.Is(err, channels.ErrUnknownChannel) {
		t.Fatalf("unknown channel: %v", err)
	}
}

func TestInboundPublishFailureIsReturned(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := newSendChannel("test")
	_, nc := e.start(t, gateway.Options{Channels: provider(ch)})
	nc.Close()
	if err := ch.handler(t.Context(), &envelope.Envelope{Content: "x", Channel: "test"}); err == nil {
		t.Fatal("publishing over a closed connection succeeded")
	}
}

func TestNoChannelsEnabled(t *testing.T) {
	e := setup(t, natsx.Topology{})
	nc, js := e.srv.JetStream(t)
	for _, enabled := range []string{"", "nope", "test,!test"} {
		_, err := gateway.Start(t.Context(), gateway.Options{
			NC: nc, JS: js, Names: e.names, Enabled: enabled,
			Channels: provider(newSendChannel("test")),
		})
		if !errors.Is(err, gateway.ErrNoChannels) {
			t.Fatalf("enabled %q: %v, want ErrNoChannels", enabled, err)
		}
	}
	if !strings.HasPrefix(gateway.ErrNoChannels.Error(), "No channels are enabled.") {
		t.Fatalf("message %q", gateway.ErrNoChannels)
	}
}

func TestOutboundIsSentOnce(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := newSendChannel("test")
	other := newSendChannel("other")
	e.start(t, gateway.Options{Channels: provider(ch, other)})
	e.publishOutbound(t, "test", "test:1", "out-1", "")
	// The same outbound id under another Nats-Msg-Id (a republish after
	// the dedupe window looks the same to the gateway).
	e.publishOutbound(t, "test", "test:1", "out-1", "out-1-copy")
	e.publishOutbound(t, "other", "other:1", "out-2", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && ch.sentCount("out-1") > 0 && other.sentCount("out-2") > 0, why
	})
	if n := ch.sentCount("out-1"); n != 1 {
		t.Fatalf("out-1 sent %d times, want 1", n)
	}
	if n := ch.triesOf("out-2"); n != 0 {
		t.Fatalf("channel test was asked to send the other channel's reply")
	}
	if n := other.sentCount("out-2"); n != 1 {
		t.Fatalf("out-2 sent %d times on other, want 1", n)
	}
}

func TestTwoInstancesDeliverEachOutboundOnce(t *testing.T) {
	e := setup(t, natsx.Topology{})
	a, b := newSendChannel("test"), newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(a)})
	e.start(t, gateway.Options{Channels: provider(b)})
	const n = 200
	for i := range n {
		e.publishOutbound(t, "test", fmt.Sprintf("test:%d", i%17), fmt.Sprintf("out-%d", i), "")
	}
	total := func() (map[string]int, int) {
		sum := a.snapshot()
		for k, v := range b.snapshot() {
			sum[k] += v
		}
		return sum, len(sum)
	}
	natstest.Eventually(t, 20*time.Second, func() (bool, string) {
		_, got := total()
		ok, why := e.settled(t, "test")
		return ok && got == n, fmt.Sprintf("%d of %d sent; %s", got, n, why)
	})
	sum, _ := total()
	for id, c := range sum {
		if c != 1 {
			t.Errorf("%s sent %d times", id, c)
		}
	}
	t.Logf("instance a sent %d, b sent %d", len(a.snapshot()), len(b.snapshot()))
}

func TestRestartMidStreamDeliversTheRestOnce(t *testing.T) {
	e := setup(t, natsx.Topology{})
	first := newSendChannel("test")
	g1, _ := e.start(t, gateway.Options{Channels: provider(first)})
	const n = 200
	for i := range n {
		e.publishOutbound(t, "test", fmt.Sprintf("test:%d", i%7), fmt.Sprintf("out-%d", i), "")
	}
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := len(first.snapshot())
		return got >= 20, fmt.Sprintf("%d sent", got)
	})
	if err := g1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := first.snapshot()
	second := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(second)})
	// Outbounds published while no gateway ran are delivered too.
	e.publishOutbound(t, "test", "test:late", "out-late", "")
	natstest.Eventually(t, 20*time.Second, func() (bool, string) {
		got := len(before) + len(second.snapshot())
		ok, why := e.settled(t, "test")
		return ok && got == n+1, fmt.Sprintf("%d of %d sent; %s", got, n+1, why)
	})
	for id := range second.snapshot() {
		if before[id] != 0 {
			t.Errorf("%s sent before and after the restart", id)
		}
	}
	for id, c := range first.snapshot() {
		if c != 1 || before[id] != 1 {
			t.Errorf("%s: first gateway sent it %d times (%d at stop)", id, c, before[id])
		}
	}
	t.Logf("sent %d before the restart, %d after", len(before), len(second.snapshot()))
}

// TestCrashLosesNothing kills a gateway's connection mid-stream: its
// claims go stale and another instance delivers every outbound; only
// the sends in flight at the crash may repeat (doc.go's guarantee).
func TestCrashLosesNothing(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayAckWait: time.Second})
	first := newSendChannel("test")
	_, nc := e.start(t, gateway.Options{Channels: provider(first), Concurrency: 4})
	const n = 100
	for i := range n {
		e.publishOutbound(t, "test", fmt.Sprintf("test:%d", i%7), fmt.Sprintf("out-%d", i), "")
	}
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := len(first.snapshot())
		return got >= 10, fmt.Sprintf("%d sent", got)
	})
	nc.Close() // crash: nothing is handed back, claims stop being refreshed
	before := first.snapshot()
	second := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(second), Concurrency: 4})
	natstest.Eventually(t, 30*time.Second, func() (bool, string) {
		sum := map[string]bool{}
		for id := range first.snapshot() {
			sum[id] = true
		}
		for id := range second.snapshot() {
			sum[id] = true
		}
		return len(sum) == n, fmt.Sprintf("%d of %d sent", len(sum), n)
	})
	dups := 0
	for id := range second.snapshot() {
		if before[id] != 0 {
			dups++
		}
	}
	if dups > 4 {
		t.Fatalf("%d outbounds sent twice, want at most the 4 in flight at the crash", dups)
	}
	t.Logf("sent %d before the crash, %d after, %d twice", len(before), len(second.snapshot()), dups)
}

func TestTransientSendFailureIsRetried(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := newSendChannel("test")
	ch.fail = func(_ *envelope.Envelope, try int) error {
		if try < 3 {
			return errors.New("telegram: 502 bad gateway")
		}
		return nil
	}
	e.start(t, gateway.Options{Channels: provider(ch)})
	e.publishOutbound(t, "test", "test:1", "out-1", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && ch.sentCount("out-1") == 1, why
	})
	if tries := ch.triesOf("out-1"); tries != 3 {
		t.Fatalf("%d tries, want 3", tries)
	}
}

// TestASessionsRepliesStayInOrderAfterAFailedSend: a reply whose send
// fails is retried before the later replies of its session are sent
// (before the fix it was handed back with a delayed nak and the next
// reply overtook it: out-2, out-3, out-1), while another session sharing
// its lane is not held up; the held replies outlive the ack wait without
// a redelivery.
func TestASessionsRepliesStayInOrderAfterAFailedSend(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayAckWait: 300 * time.Millisecond})
	ch := newSendChannel("test")
	ch.fail = func(env *envelope.Envelope, try int) error {
		if env.ID == "out-1" && try == 1 {
			return errors.New("telegram: 502 bad gateway")
		}
		return nil
	}
	// One lane for every session; the retry due after three ack waits.
	e.start(t, gateway.Options{Channels: provider(ch), Concurrency: 1, RetryDelay: time.Second})
	for _, id := range []string{"out-1", "out-2", "out-3"} {
		e.publishOutbound(t, "test", "test:a", id, "")
	}
	e.publishOutbound(t, "test", "test:b", "out-b", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && len(ch.sentInOrder()) == 4, why
	})
	if got, want := ch.sentInOrder(), []string{"out-b", "out-1", "out-2", "out-3"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	if info := e.consumerInfo(t, "test"); info.Delivered.Consumer != 4 {
		t.Fatalf("%d deliveries for 4 replies: held replies were redelivered", info.Delivered.Consumer)
	}
}

// TestHeldRepliesAreHandedBackOnStop: replies held behind a failed send
// go back to the stream when their gateway stops, and the next gateway
// sends them, in order.
func TestHeldRepliesAreHandedBackOnStop(t *testing.T) {
	e := setup(t, natsx.Topology{})
	first := newSendChannel("test")
	first.fail = func(*envelope.Envelope, int) error { return errors.New("telegram: 502 bad gateway") }
	g, _ := e.start(t, gateway.Options{Channels: provider(first), Concurrency: 1, RetryDelay: 2 * time.Second})
	for _, id := range []string{"out-1", "out-2"} {
		e.publishOutbound(t, "test", "test:a", id, "")
	}
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return first.triesOf("out-1") == 1, "out-1 not tried"
	})
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := first.triesOf("out-2"); n != 0 {
		t.Fatalf("out-2 tried %d times behind a failed out-1", n)
	}
	second := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(second), Concurrency: 1})
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && len(second.sentInOrder()) == 2, why
	})
	if got, want := second.sentInOrder(), []string{"out-1", "out-2"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

func TestFailingSendIsDeadLettered(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayMaxDeliver: 3})
	ch := newSendChannel("test")
	ch.fail = func(env *envelope.Envelope, _ int) error {
		if env.ID == "refused" {
			return fmt.Errorf("chat not found: %w", channels.ErrUndeliverable)
		}
		return errors.New("telegram: timeout")
	}
	e.start(t, gateway.Options{Channels: provider(ch)})
	e.publishOutbound(t, "test", "test:1", "flaky", "")
	raw := e.deadLetter(t, dlq.ReasonSendFailed)
	if got := raw.Header.Get(subjects.HeaderDLQError); !strings.Contains(got, "timeout") {
		t.Fatalf("dead letter error %q", got)
	}
	if tries := ch.triesOf("flaky"); tries != 3 {
		t.Fatalf("%d tries, want GatewayMaxDeliver = 3", tries)
	}
	e.publishOutbound(t, "test", "test:1", "refused", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		raw := e.deadLetter(t, dlq.ReasonSendFailed)
		return strings.Contains(raw.Header.Get(subjects.HeaderDLQError), "chat not found"), "no dead letter for refused"
	})
	if tries := ch.triesOf("refused"); tries != 1 {
		t.Fatalf("undeliverable: %d tries, want 1", tries)
	}
	// A failed id is not marked sent: a later copy is tried again.
	ch.mu.Lock()
	ch.fail = nil
	ch.mu.Unlock()
	e.publishOutbound(t, "test", "test:1", "flaky", "flaky-again")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return ch.sentCount("flaky") == 1, "flaky not sent after the fix"
	})
}

func TestBadOutboundIsDeadLettered(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(ch)})
	publish := func(msgID string, header map[string]string, data string) {
		msg := nats.NewMsg(e.names.Outbound("test", "test:1"))
		msg.Header.Set(subjects.HeaderMsgID, msgID)
		for k, v := range header {
			msg.Header.Set(k, v)
		}
		msg.Data = []byte(data)
		if _, err := e.js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	publish("garbage", nil, "not a cloudevent {")
	if raw := e.deadLetter(t, dlq.ReasonUndecodable); string(raw.Data) != "not a cloudevent {" || raw.Header.Get(subjects.HeaderDLQSubject) != e.names.Outbound("test", "test:1") {
		t.Fatalf("dead letter %q subject %q", raw.Data, raw.Header.Get(subjects.HeaderDLQSubject))
	}
	inbound, err := events.New(events.TypeEnvelopeInbound, events.Attrs{ID: "in-1", Source: "/test"}, &envelope.Envelope{ID: "in-1", Content: "x"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(inbound)
	if err != nil {
		t.Fatal(err)
	}
	publish("wrong-type", map[string]string{"Content-Type": events.ContentTypeStructured}, string(body))
	e.deadLetter(t, dlq.ReasonUnknownType)
	bad := strings.Replace(string(body), events.TypeEnvelopeInbound, events.TypeEnvelopeOutbound, 1)
	bad = strings.Replace(bad, `"content":"x"`, `"content":7`, 1)
	publish("bad-data", map[string]string{"Content-Type": events.ContentTypeStructured}, bad)
	e.deadLetter(t, dlq.ReasonInvalid)
	// The gateway still delivers.
	e.publishOutbound(t, "test", "test:1", "good", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && ch.sentCount("good") == 1, why
	})
}

// debounced is a channel that asks for debounce.
type debounced struct{ *sendChannel }

func (debounced) NeedsDebounce() bool { return true }

func TestDebouncedMessagesArePublishedMerged(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := debounced{newSendChannel("tg")}
	p := func(_ context.Context, h hooks.MessageHandler) ([]hooks.Channel, error) {
		ch.handler = h
		return []hooks.Channel{ch}, nil
	}
	e.start(t, gateway.Options{Channels: p}) // default debounce: 1s
	for i, text := range []string{"first", "second"} {
		m := &envelope.Envelope{ID: fmt.Sprintf("m%d", i), Content: text, Channel: "tg", ChatID: "1", IsActive: true}
		if err := ch.handler(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.js.Stream(t.Context(), e.names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		raw, err = st.GetLastMsgForSubject(t.Context(), e.names.Inbound("tg"))
		return err == nil, fmt.Sprint(err)
	})
	ev, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	var got envelope.Envelope
	if err := events.DecodeData(ev, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "m1" || got.Content != "first\nsecond" {
		t.Fatalf("published %q %q, want the merged batch", got.ID, got.Content)
	}
	if info, _ := st.Info(t.Context()); info.State.Msgs != 1 {
		t.Fatalf("%d inbound messages, want 1", info.State.Msgs)
	}
}

func TestSelected(t *testing.T) {
	ch := newSendChannel("test")
	got, err := gateway.Selected(t.Context(), provider(ch), "all")
	if err != nil || len(got) != 1 || got[0].Name() != "test" {
		t.Fatalf("Selected = %v, %v", got, err)
	}
	if err := ch.handler(t.Context(), &envelope.Envelope{Content: "x", Channel: "test"}); err == nil {
		t.Fatal("a message to a channel of Selected was accepted")
	}
	if _, err := gateway.Selected(t.Context(), provider(ch), "!test"); !errors.Is(err, gateway.ErrNoChannels) {
		t.Fatalf("nothing enabled: %v", err)
	}
	failing := func(context.Context, hooks.MessageHandler) ([]hooks.Channel, error) {
		return nil, errors.New("plugin broke")
	}
	if _, err := gateway.Selected(t.Context(), failing, "all"); err == nil || !strings.Contains(err.Error(), "plugin broke") {
		t.Fatalf("failing provider: %v", err)
	}
}

// TestStaleClaimIsTakenOver: a claim left by a gateway that died before
// marking its send makes the message wait while it is fresh and is taken
// over once it is older than the ack wait.
func TestStaleClaimIsTakenOver(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayAckWait: 500 * time.Millisecond})
	kv, err := e.js.KeyValue(t.Context(), e.names.DeliveredBucket())
	if err != nil {
		t.Fatal(err)
	}
	claimedAt := time.Now()
	if _, err := kv.Create(t.Context(), e.names.DeliveredKey("test", "out-1"), []byte("claimed")); err != nil {
		t.Fatal(err)
	}
	ch := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(ch)})
	e.publishOutbound(t, "test", "test:1", "out-1", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return ch.sentCount("out-1") == 1, "not sent"
	})
	if waited := time.Since(claimedAt); waited < 500*time.Millisecond {
		t.Fatalf("sent %v after the claim, before it went stale", waited)
	}
	e2, err := kv.Get(t.Context(), e.names.DeliveredKey("test", "out-1"))
	if err != nil || string(e2.Value()) != "sent" {
		t.Fatalf("mark %v, %v; want sent", e2, err)
	}
}

// TestSlowSendKeepsItsClaim: a send that outlasts the ack wait keeps
// refreshing its claim, so a second copy of the id (on another lane) is
// not sent meanwhile, and is skipped once the first is marked sent.
func TestSlowSendKeepsItsClaim(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayAckWait: 300 * time.Millisecond})
	ch := newSendChannel("test")
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	ch.fail = func(*envelope.Envelope, int) error {
		entered <- struct{}{}
		ch.mu.Unlock() // let the test read the channel while this send blocks
		<-release
		ch.mu.Lock()
		return nil
	}
	e.start(t, gateway.Options{Channels: provider(ch)})
	e.publishOutbound(t, "test", "test:a", "dup", "")
	<-entered
	e.publishOutbound(t, "test", "test:b", "dup", "dup-copy")
	kv, err := e.js.KeyValue(t.Context(), e.names.DeliveredBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := e.names.DeliveredKey("test", "dup")
	// Five refreshes take longer than the ack wait.
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		en, err := kv.Get(t.Context(), key)
		return err == nil && en.Revision() >= 6 && time.Since(en.Created()) < 300*time.Millisecond, fmt.Sprintf("claim %v, %v", en, err)
	})
	if n := ch.triesOf("dup"); n != 1 {
		t.Fatalf("%d sends started while the first holds its claim, want 1", n)
	}
	close(release)
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && ch.sentCount("dup") >= 1, why
	})
	if n := ch.sentCount("dup"); n != 1 {
		t.Fatalf("dup sent %d times, want 1", n)
	}
}

// startHook runs f when the channel starts.
type startHook struct {
	*sendChannel
	f func()
}

func (s startHook) Start(ctx context.Context) error {
	s.f()
	return s.sendChannel.Start(ctx)
}

// TestReplyPublishedAsTheChannelStartsIsDelivered: the delivery consumer
// exists before the channels start, so a reply published at once (the
// first message's) is not missed by its DeliverNew policy.
func TestReplyPublishedAsTheChannelStartsIsDelivered(t *testing.T) {
	e := setup(t, natsx.Topology{})
	ch := newSendChannel("test")
	hooked := startHook{ch, func() { e.publishOutbound(t, "test", "test:1", "first", "") }}
	p := func(context.Context, hooks.MessageHandler) ([]hooks.Channel, error) {
		return []hooks.Channel{hooked}, nil
	}
	e.start(t, gateway.Options{Channels: p})
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return ch.sentCount("first") == 1, "the first reply was not delivered"
	})
}
