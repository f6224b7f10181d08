package events

// This file bridges a Bus to JetStream; with nats_adapter.go it is the only
// file of the package that uses nats.go types.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// Bridge defaults.
const (
	// DefaultMaxInFlight is the default bound on events published and not
	// yet acknowledged.
	DefaultMaxInFlight = 512
	// DefaultAckTimeout is how long the bridge waits for a publish
	// acknowledgement by default.
	DefaultAckTimeout = 30 * time.Second
)

// EntryReserve is the part of the NATS server's max_payload an event
// leaves free: the tape entries the recorder makes of an event carry its
// content in an envelope of their own (a few hundred bytes more at most),
// and they must fit too. An event larger than max_payload less
// EntryReserve is not published: its publish fails with an error that
// wraps nats.ErrMaxPayload and names both sizes, and it takes no
// sequence number of its run.
const EntryReserve = 4 << 10

// maxKeptErrors bounds the publish errors a tracker keeps between flushes;
// further ones are only counted.
const maxKeptErrors = 32

// Bridge errors.
var (
	// ErrBridgeClosed: the event was emitted after [Bridge.Close].
	ErrBridgeClosed = errors.New("bridge closed")
	// ErrAckTimeout: JetStream did not acknowledge a publish in time; the
	// event may or may not be stored.
	ErrAckTimeout = errors.New("publish not acknowledged in time")
)

// Bridge publishes the events of attached buses as CloudEvents (structured
// mode, see [Encode]) to JetStream: an event of type T of session S goes to
// names.Event(S, SubjectName(T)) in stream names.EventsStream(), with
// Nats-Msg-Id set to the event id. Observers on NATS see what happened;
// they never change control flow.
//
// Publishing is asynchronous and pipelined: an event is encoded and sent
// on the emitting goroutine when its dispatch ends, without waiting for
// JetStream; acknowledgements are collected in the background, and
// [Attachment.Flush] or [Bridge.Flush] waits for them and reports every
// failure. At most MaxInFlight events are unacknowledged at a time; an
// emit beyond that waits for room (back-pressure) or for its ctx.
//
// Per run, the seq extension counts 1, 2, 3, … and the stream holds the
// events in seq order: an attachment publishes one event at a time. The
// exceptions are JetStream's own retry of a publish that found no stream
// and the bridge's publishing again of an event whose publish failed
// transiently or went unanswered (a lost connection or stream leader):
// the same message with the same Nats-Msg-Id, so never stored twice, it
// can land behind later events; consumers that need order use seq.
//
// Custom events not in the codec's [Registry] are not published.
// A Bridge is safe for concurrent use and serves every run of a worker;
// [Bridge.Close] releases it.
type Bridge struct {
	js         jetstream.JetStream
	names      subjects.Names
	source     string
	wire       wireEncoder
	codec      Codec
	trace      func(ctx context.Context) (traceparent, tracestate string)
	ackTimeout time.Duration
	pubOpts    []jetstream.PublishOpt

	// slots holds a token per unacknowledged publish: the in-flight
	// window.
	slots chan struct{}
	// acks carries the publishes, in order, to the collector goroutine;
	// its capacity equals the window, so a send never blocks.
	acks chan pendingAck
	// collected is closed when the collector goroutine has exited.
	collected chan struct{}

	// mu guards closed and the sends on acks: publishers hold it for
	// reading, Close for writing.
	mu     sync.RWMutex
	closed bool
	// enqueueMu makes counting a publish in all and queueing it on acks
	// one step, so the n-th counted publish is the n-th collected.
	enqueueMu sync.Mutex
	all       tracker
}

// pendingAck is one publish awaiting its acknowledgement.
type pendingAck struct {
	future jetstream.PubAckFuture
	sent   time.Time
	att    *Attachment
	ceType string
	id     string
}

// BridgeOption configures a [Bridge].
type BridgeOption func(*Bridge) error

// WithCodec sets the codec: its Registry adds custom events, its
// CaptureContent puts LLM message bodies on the wire. The default is the
// zero Codec.
func WithCodec(c Codec) BridgeOption {
	return func(b *Bridge) error {
		b.codec = c
		return nil
	}
}

// WithMaxInFlight bounds the events published and not yet acknowledged
// (default [DefaultMaxInFlight]); n must be positive.
func WithMaxInFlight(n int) BridgeOption {
	return func(b *Bridge) error {
		if n < 1 {
			return fmt.Errorf("events: max in-flight %d: must be positive", n)
		}
		b.slots = make(chan struct{}, n)
		return nil
	}
}

// WithAckTimeout sets how long to wait for each acknowledgement (default
// [DefaultAckTimeout]); d must be positive.
func WithAckTimeout(d time.Duration) BridgeOption {
	return func(b *Bridge) error {
		if d <= 0 {
			return fmt.Errorf("events: ack timeout %v: must be positive", d)
		}
		b.ackTimeout = d
		return nil
	}
}

// WithTraceContext sets the function that reads the W3C trace context of
// an emit's ctx for the traceparent and tracestate extensions and headers
// (the telemetry package supplies one). Without it no trace context is
// sent.
func WithTraceContext(fn func(ctx context.Context) (traceparent, tracestate string)) BridgeOption {
	return func(b *Bridge) error {
		b.trace = fn
		return nil
	}
}

// NewBridge returns a bridge publishing to js under names, with CloudEvent
// source source (see [Source]: /bub/<service>/<instance>). The caller
// creates the events stream. Close the bridge when done.
func NewBridge(js jetstream.JetStream, names subjects.Names, source string, opts ...BridgeOption) (*Bridge, error) {
	if js == nil {
		return nil, errors.New("events: NewBridge: nil JetStream")
	}
	if source == "" {
		return nil, errors.New("events: NewBridge: empty source")
	}
	b := &Bridge{
		js:         js,
		names:      names,
		source:     source,
		wire:       newWireEncoder(source),
		ackTimeout: DefaultAckTimeout,
		pubOpts:    []jetstream.PublishOpt{jetstream.WithExpectStream(names.EventsStream())},
		collected:  make(chan struct{}),
	}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	if b.slots == nil {
		b.slots = make(chan struct{}, DefaultMaxInFlight)
	}
	b.acks = make(chan pendingAck, cap(b.slots))
	go b.collect()
	return b, nil
}

// Attachment is a bridge attached to one bus. It numbers the events of
// each run it publishes and tracks their acknowledgements, so a worker can
// flush exactly its turn's events.
type Attachment struct {
	bridge *Bridge
	off    func()
	// mu makes numbering and publishing one step per event, so the stream
	// order of a run is its seq order.
	mu  sync.Mutex
	seq map[string]int64 // per run id; guarded by mu
	t   tracker
}

// Attach registers the bridge as a sink of bus (see [Bus.OnEmitted]): it
// publishes every event after the bus's handlers have run. Attach one bus
// per run; seq restarts with each attachment.
func (b *Bridge) Attach(bus *Bus) *Attachment {
	a := &Attachment{bridge: b, seq: map[string]int64{}}
	a.off = bus.OnEmitted(a.publish)
	return a
}

// Detach stops publishing the bus's events; events already published are
// still tracked. It is idempotent.
func (a *Attachment) Detach() { a.off() }

// Flush waits until every event this attachment published so far is
// acknowledged, and returns the failures since its previous Flush:
// encoding, publishing, acknowledgement errors and timeouts. The worker
// calls it before it publishes a turn's outbound envelopes and acks the
// inbound one. An error means an event may be missing from the stream.
func (a *Attachment) Flush(ctx context.Context) error { return a.t.flush(ctx) }

// Flush waits until every event published through the bridge so far is
// acknowledged, and returns every failure since its previous Flush.
func (b *Bridge) Flush(ctx context.Context) error { return b.all.flush(ctx) }

// Close stops publishing (later events fail with [ErrBridgeClosed]),
// waits for the outstanding acknowledgements as Flush does, and stops the
// bridge's goroutine. Attached buses may stay attached.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.acks)
	}
	b.mu.Unlock()
	select {
	case <-b.collected:
	case <-ctx.Done():
		return fmt.Errorf("events: closing bridge: %w", ctx.Err())
	}
	return b.all.flush(ctx)
}

// publish is the bus sink: it publishes ev and records any failure for
// Flush.
func (a *Attachment) publish(ctx context.Context, ev Event) {
	err := a.bridge.publish(ctx, a, ev)
	if err != nil && !errors.Is(err, ErrUnregistered) {
		a.t.fail(err)
		a.bridge.all.fail(err)
	}
}

func (b *Bridge) publish(ctx context.Context, a *Attachment, ev Event) error {
	typ, data, err := b.codec.payload(ev)
	if err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("events: publishing %s: %w", typ, ErrBridgeClosed)
	}
	if err := b.takeSlot(ctx); err != nil {
		return fmt.Errorf("events: publishing %s: %w", typ, err)
	}
	if err := a.send(ctx, ev, typ, data); err != nil {
		<-b.slots
		return err
	}
	return nil
}

// send numbers, encodes and publishes one event and queues it for the
// collector. The caller holds a window slot and b.mu for reading.
func (a *Attachment) send(ctx context.Context, ev Event, typ string, data any) error {
	b := a.bridge
	a.mu.Lock()
	defer a.mu.Unlock()
	attrs := Attrs{Source: b.source}
	run := ev.EventMeta().RunID
	if run != "" {
		attrs.Seq = a.seq[run] + 1
	}
	if b.trace != nil {
		attrs.Traceparent, attrs.Tracestate = b.trace(ctx)
	}
	msg, id, err := b.message(ev, typ, data, attrs)
	if err != nil {
		return err
	}
	if err := a.enqueue(msg, typ, id); err != nil {
		return err
	}
	if run != "" {
		a.seq[run] = attrs.Seq
	}
	return nil
}

// enqueue publishes msg and queues it for the collector. The caller holds
// a window slot, b.mu for reading and a.mu.
func (a *Attachment) enqueue(msg *nats.Msg, typ, id string) error {
	b := a.bridge
	if limit := b.js.Conn().MaxPayload(); limit > 0 && int64(len(msg.Data))+EntryReserve > limit {
		return fmt.Errorf("events: the %s event %s is %d bytes; an event may take the NATS server's max_payload (%d bytes) less %d for its tape entries: %w",
			typ, id, len(msg.Data), limit, EntryReserve, nats.ErrMaxPayload)
	}
	f, err := b.js.PublishMsgAsync(msg, b.pubOpts...)
	if err != nil {
		return fmt.Errorf("events: publishing %s %s: %w", typ, id, err)
	}
	// Count and queue in one step, here under a.mu and enqueueMu, so both
	// trackers see their publishes resolved in the order they counted them.
	b.enqueueMu.Lock()
	defer b.enqueueMu.Unlock()
	a.t.issue()
	b.all.issue()
	b.acks <- pendingAck{future: f, sent: time.Now(), att: a, ceType: typ, id: id}
	return nil
}

// Republish publishes recorded, the events of an earlier attempt of a run
// in seq order (as decoded from the events stream), as the first events
// of run: each keeps its type, time, session and data (edit, when not
// nil, may replace the data) and gets a new id and run's next seq, so the
// run's later events follow them. A worker resuming an interrupted run
// (docs/durable.md) starts it with the attempt's events, and the stream
// holds the whole run once under its new id. Flush reports failures as
// for emitted events.
func (a *Attachment) Republish(ctx context.Context, run string, recorded []ce.Event, edit func(e ce.Event) (data any, err error)) error {
	for _, e := range recorded {
		var data any = json.RawMessage(e.Data())
		if edit != nil {
			d, err := edit(e)
			if err != nil {
				return err
			}
			if d != nil {
				data = d
			}
		}
		if err := a.republish(ctx, run, e, data); err != nil {
			return err
		}
	}
	return nil
}

// takeSlot takes a place in the in-flight window: at once when there is
// room, whatever ctx (a cancelled run's last events still go out), else
// waiting for room or for ctx.
func (b *Bridge) takeSlot(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the in-flight window: %w", ctx.Err())
	}
}

func (a *Attachment) republish(ctx context.Context, run string, e ce.Event, data any) error {
	b := a.bridge
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("events: republishing %s: %w", e.Type(), ErrBridgeClosed)
	}
	if err := b.takeSlot(ctx); err != nil {
		return fmt.Errorf("events: republishing %s: %w", e.Type(), err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	attrs := Attrs{Source: b.source, RunID: run, SessionID: SessionID(e), Seq: a.seq[run] + 1, Time: e.Time()}
	if b.trace != nil {
		attrs.Traceparent, attrs.Tracestate = b.trace(ctx)
	}
	out, err := New(e.Type(), attrs, data)
	if err == nil {
		var msg *nats.Msg
		if msg, err = ToMsg(b.names.Event(attrs.SessionID, SubjectName(e.Type())), out); err == nil {
			err = a.enqueue(msg, e.Type(), out.ID())
		}
	}
	if err != nil {
		<-b.slots
		return err
	}
	a.seq[run] = attrs.Seq
	return nil
}

// message returns the NATS message of ev and its event id: written
// directly by the wire encoder (wire.go) when it applies, else built with
// New and ToMsg; the bytes are the same.
func (b *Bridge) message(ev Event, typ string, data any, a Attrs) (*nats.Msg, string, error) {
	m := ev.EventMeta()
	if a.RunID == "" {
		a.RunID = m.RunID
	}
	if a.SessionID == "" {
		a.SessionID = m.SessionID
	}
	if a.ID == "" {
		a.ID = NewID()
	}
	if a.Time.IsZero() {
		a.Time = time.Now()
	}
	if !b.wire.ok(typ, a) {
		e, err := New(typ, a, data)
		if err != nil {
			return nil, "", err
		}
		msg, err := ToMsg(b.names.Event(SessionID(e), SubjectName(typ)), e)
		if err != nil {
			return nil, "", fmt.Errorf("events: encoding %s: %w", typ, err)
		}
		return msg, e.ID(), nil
	}
	body, err := b.wire.encode(typ, a, data)
	if err != nil {
		return nil, "", fmt.Errorf("encoding %s data: %w", typ, err)
	}
	return structuredMsg(b.names.Event(a.SessionID, SubjectName(typ)), a.ID, a.Traceparent, a.Tracestate, body), a.ID, nil
}

// collect awaits the acknowledgements in publish order, frees their
// window slots and records the outcomes. It exits when Close closes acks
// and every queued publish is resolved.
func (b *Bridge) collect() {
	defer close(b.collected)
	timer := time.NewTimer(b.ackTimeout)
	defer timer.Stop()
	for p := range b.acks {
		err := b.await(p, timer)
		<-b.slots
		p.att.t.complete(err)
		b.all.complete(err)
	}
}

// await waits for p's acknowledgement until ackTimeout after it was sent.
// An acknowledgement that is already in counts even when the collector
// reaches it late. A publish that failed because its connection dropped
// (nats.ErrDisconnected), that found no stream leader to answer (an
// election) or is unanswered after [republishAfter] — its stream leader
// was lost with it — is published again, the same message with the same
// Nats-Msg-Id, so JetStream stores it once, until ackTimeout. Other
// failures are reported.
func (b *Bridge) await(p pendingAck, timer *time.Timer) error {
	timer.Reset(time.Until(p.sent.Add(b.ackTimeout)))
	future := p.future
	var last error // the last retryable failure
	timedOut := func() error {
		if last != nil {
			return p.failed(fmt.Errorf("%w (last attempt: %w)", ErrAckTimeout, last))
		}
		return p.failed(ErrAckTimeout)
	}
	for {
		var err error
		select {
		case <-future.Ok():
			return nil
		case err = <-future.Err():
		default:
			again := time.NewTimer(republishAfter)
			select {
			case <-future.Ok():
				again.Stop()
				return nil
			case err = <-future.Err():
				again.Stop()
			case <-again.C:
			case <-timer.C:
				again.Stop()
				return timedOut()
			}
		}
		if err != nil {
			if !retryable(err) {
				return p.failed(err)
			}
			last = err
			pause := time.NewTimer(retryPause)
			select {
			case <-pause.C:
			case <-timer.C:
				pause.Stop()
				return timedOut()
			}
		}
		f, err := b.js.PublishMsgAsync(p.future.Msg(), b.pubOpts...)
		if err == nil {
			future = f
		}
	}
}

// republishAfter is how long an unacknowledged event publish waits before
// it is published again (within the bridge's ack timeout). A publish
// sent while its stream elects a leader is never answered: a run goes on
// at most this long after the election.
const republishAfter = time.Second

// retryPause is the pause before an event whose publish failed
// transiently is published again: short, so a run goes on soon after its
// stream's new leader is elected.
const retryPause = 250 * time.Millisecond

// retryable reports whether a failed event publish is worth publishing
// again: its connection dropped, or its stream has no leader to answer
// (nats.go's own retries of "no responders" are over: an election
// outlasts them).
func retryable(err error) bool {
	return errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// failed returns err as the failure to publish p.
func (p pendingAck) failed(err error) error {
	return fmt.Errorf("events: publishing %s %s: %w", p.ceType, p.id, err)
}

// tracker counts issued and completed publishes and keeps their errors
// until a flush reports them.
type tracker struct {
	mu       sync.Mutex
	issued   uint64
	done     uint64
	errs     []error
	dropped  int           // errors counted beyond maxKeptErrors
	progress chan struct{} // closed when done grows; nil when no one waits
}

func (t *tracker) issue() {
	t.mu.Lock()
	t.issued++
	t.mu.Unlock()
}

// complete counts one resolved publish and its error, if any.
func (t *tracker) complete(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done++
	t.record(err)
	if t.progress != nil {
		close(t.progress)
		t.progress = nil
	}
}

// fail records an error of an event that was never issued.
func (t *tracker) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.record(err)
}

func (t *tracker) record(err error) {
	switch {
	case err == nil:
	case len(t.errs) < maxKeptErrors:
		t.errs = append(t.errs, err)
	default:
		t.dropped++
	}
}

// flush waits until every publish issued before the call is resolved and
// returns the errors recorded since the previous flush.
func (t *tracker) flush(ctx context.Context) error {
	t.mu.Lock()
	target := t.issued
	for t.done < target {
		if t.progress == nil {
			t.progress = make(chan struct{})
		}
		progress := t.progress
		t.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			return fmt.Errorf("events: flushing: %w", ctx.Err())
		}
		t.mu.Lock()
	}
	errs := t.errs
	if t.dropped > 0 {
		errs = append(errs, fmt.Errorf("events: %d more publish errors", t.dropped))
	}
	t.errs, t.dropped = nil, 0
	t.mu.Unlock()
	return errors.Join(errs...)
}
