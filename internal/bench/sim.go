package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tape"
)

// The simulation is the limit of P3 and P4: a turn with the message pattern
// of a real one, written with bare nats.go and nothing else. A client
// publishes the inbound message to JetStream (deduplicated by id) and
// waits for the outbound one; a sim worker pulls it from the same kind of
// work-queue stream and durable consumer, makes the turn's interceptor
// requests to raw responders in the interceptor process, publishes the
// turn's lifecycle events asynchronously, waits for their acks, publishes
// the outbound message and acks; a sim recorder pulls the events in
// batches, writes the turn's tape messages when its last event arrives and
// acknowledges each batch with one ack (AckAll). Counts and sizes of every
// message are those measured on the real pipeline in the same run
// (simParams). Streams, consumers and buckets are configured exactly as
// the real ones (natsx.Topology, tape.NewJetStreamStore) under another
// prefix.

// simPrefix is the NATS name prefix of the simulation.
const simPrefix = "bubsim"

// rawService is the <service> token of the raw responders.
const rawService = "raw"

// Headers of the simulation's messages.
const (
	hdrSession = "Bub-Bench-Session"
	hdrReplyTo = "Bub-Bench-Reply-To"
	hdrIndex   = "Bub-Bench-Index"
	hdrCount   = "Bub-Bench-Count"
)

func simNames() subjects.Names {
	n, err := subjects.New(simPrefix)
	if err != nil {
		panic(err) // a constant prefix
	}
	return n
}

// hop is one interceptor request of a turn: the hook and the request
// size.
type hop struct {
	Hook  string `json:"hook"`
	Bytes int    `json:"bytes"`
}

// simParams is the message pattern of one turn, measured on the real
// pipeline.
type simParams struct {
	InboundBytes int   `json:"inbound_bytes"`
	Hops         []hop `json:"hops"`
	Events       int   `json:"events"`
	EventBytes   int   `json:"event_bytes"`
	TapeMsgs     int   `json:"tape_msgs"`
	TapeBytes    int   `json:"tape_bytes"`
	// TapeHeader is the headers of a real tape message but the NATS ones
	// (Nats-Msg-Id, Nats-Expected-…), which the simulation sets itself
	// (the CloudEvents Content-Type of a structured event).
	TapeHeader    nats.Header `json:"tape_header,omitempty"`
	OutboundBytes int         `json:"outbound_bytes"`
	// Concurrency bounds turns in flight per sim worker (the real worker's
	// setting).
	Concurrency int `json:"concurrency"`
}

// ensureSimTopology creates the simulation's streams, consumers and tape
// stream, configured as the real ones except that the recorder's consumer
// acknowledges in batches (AckAll).
func ensureSimTopology(ctx context.Context, js jetstream.JetStream, replicas int) error {
	names := simNames()
	t := natsx.Topology{Replicas: max(replicas, 1)}
	for _, sc := range t.Streams(names) {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("sim stream %s: %w", sc.Name, err)
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, names.InboundStream(), t.WorkerConsumer(names)); err != nil {
		return fmt.Errorf("sim worker consumer: %w", err)
	}
	rc := t.RecorderConsumer(names)
	rc.AckPolicy = jetstream.AckAllPolicy
	if _, err := js.CreateOrUpdateConsumer(ctx, names.EventsStream(), rc); err != nil {
		return fmt.Errorf("sim recorder consumer: %w", err)
	}
	if _, err := tape.NewJetStreamStore(ctx, js, names, tape.WithReplicas(t.Replicas)); err != nil {
		return fmt.Errorf("sim tape stream: %w", err)
	}
	return nil
}

// filler returns n bytes of JSON-ish text.
func filler(n int) []byte {
	b := make([]byte, max(n, 2))
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	b[0], b[len(b)-1] = '"', '"'
	return b
}

// simWorker runs sim turns until ctx ends.
type simWorker struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	names    subjects.Names
	p        simParams
	hopBody  [][]byte
	event    []byte
	outbound []byte
}

func runSimWorker(ctx context.Context, nc *nats.Conn, p simParams) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	w := &simWorker{nc: nc, js: js, names: simNames(), p: p, event: filler(p.EventBytes), outbound: filler(p.OutboundBytes)}
	for _, h := range p.Hops {
		w.hopBody = append(w.hopBody, filler(h.Bytes))
	}
	cons, err := js.Consumer(ctx, w.names.InboundStream(), w.names.WorkerConsumer())
	if err != nil {
		return fmt.Errorf("sim worker consumer: %w", err)
	}
	conc := max(p.Concurrency, 1)
	it, err := cons.Messages(jetstream.PullMaxMessages(conc), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		it.Drain()
	}()
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return nil
			}
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := w.turn(ctx, msg); err != nil {
				_ = msg.Nak()
			}
		})
	}
}

func (w *simWorker) turn(ctx context.Context, msg jetstream.Msg) error {
	id := msg.Headers().Get(subjects.HeaderMsgID)
	session := msg.Headers().Get(hdrSession)
	events := w.names.Event(session, "sim")
	count := strconv.Itoa(w.p.Events)
	var futures []jetstream.PubAckFuture
	// The events are spread around the hops as a run spreads them around
	// its LLM call.
	publish := func(from, to int) error {
		for k := from; k < to; k++ {
			m := nats.NewMsg(events)
			m.Header.Set(subjects.HeaderMsgID, id+"/"+strconv.Itoa(k))
			m.Header.Set(hdrSession, session)
			m.Header.Set(hdrIndex, strconv.Itoa(k))
			m.Header.Set(hdrCount, count)
			m.Data = w.event
			f, err := w.js.PublishMsgAsync(m)
			if err != nil {
				return err
			}
			futures = append(futures, f)
		}
		return nil
	}
	parts := len(w.hopBody) + 1
	for i, body := range w.hopBody {
		if err := publish(w.p.Events*i/parts, w.p.Events*(i+1)/parts); err != nil {
			return err
		}
		if _, err := w.nc.Request(w.names.Hook(rawService, w.p.Hops[i].Hook), body, 5*time.Second); err != nil {
			return err
		}
	}
	if err := publish(w.p.Events*(parts-1)/parts, w.p.Events); err != nil {
		return err
	}
	if err := awaitAcks(ctx, futures); err != nil {
		return err
	}
	out := nats.NewMsg(w.names.Outbound("sim", session))
	out.Header.Set(subjects.HeaderMsgID, id+"/0")
	out.Header.Set(hdrReplyTo, id)
	out.Data = w.outbound
	if _, err := w.js.PublishMsg(ctx, out); err != nil {
		return err
	}
	return msg.Ack()
}

// awaitAcks waits for every publish acknowledgement.
func awaitAcks(ctx context.Context, futures []jetstream.PubAckFuture) error {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// runSimRecorder consumes sim events in batches until ctx ends.
func runSimRecorder(ctx context.Context, nc *nats.Conn, p simParams) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	names := simNames()
	cons, err := js.Consumer(ctx, names.EventsStream(), names.RecorderConsumer())
	if err != nil {
		return fmt.Errorf("sim recorder consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return err
	}
	in := make(chan jetstream.Msg, 2048)
	go func() {
		defer close(in)
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				continue
			}
			in <- m
		}
	}()
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	entry := filler(p.TapeBytes)
	const maxBatch = 1024
	for m := range in {
		batch := []jetstream.Msg{m}
	fill:
		for len(batch) < maxBatch {
			select {
			case m, ok := <-in:
				if !ok {
					break fill
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		var futures []jetstream.PubAckFuture
		for _, m := range batch {
			h := m.Headers()
			if atoi(h.Get(hdrIndex)) != atoi(h.Get(hdrCount))-1 {
				continue
			}
			// The turn's last event: write its tape messages.
			session := h.Get(hdrSession)
			id := h.Get(subjects.HeaderMsgID)
			for t := range p.TapeMsgs {
				tm := nats.NewMsg(names.Tape(session))
				maps.Copy(tm.Header, p.TapeHeader)
				tm.Header.Set(subjects.HeaderMsgID, id+"/t"+strconv.Itoa(t))
				tm.Data = entry
				f, err := js.PublishMsgAsync(tm)
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
		}
		if err := awaitAcks(ctx, futures); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := batch[len(batch)-1].Ack(); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// simClient sends sim turns and waits for their outbound messages.
type simClient struct {
	js    jetstream.JetStream
	names subjects.Names
	sub   *nats.Subscription
	body  []byte

	mu      sync.Mutex
	waiters map[string]chan struct{}
}

func newSimClient(nc *nats.Conn, js jetstream.JetStream, inboundBytes int) (*simClient, error) {
	c := &simClient{js: js, names: simNames(), body: filler(inboundBytes), waiters: map[string]chan struct{}{}}
	sub, err := nc.Subscribe(c.names.OutboundAll(), func(m *nats.Msg) {
		id := m.Header.Get(hdrReplyTo)
		c.mu.Lock()
		ch, ok := c.waiters[id]
		delete(c.waiters, id)
		c.mu.Unlock()
		if ok {
			close(ch)
		}
	})
	if err != nil {
		return nil, err
	}
	sub.SetPendingLimits(-1, 256<<20)
	c.sub = sub
	return c, nil
}

func (c *simClient) Close() { _ = c.sub.Unsubscribe() }

// turn runs one sim turn of session and waits for its outbound message.
func (c *simClient) turn(ctx context.Context, id, session string) error {
	ch := make(chan struct{})
	c.mu.Lock()
	c.waiters[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	m := nats.NewMsg(c.names.Inbound("sim"))
	m.Header.Set(subjects.HeaderMsgID, id)
	m.Header.Set(hdrSession, session)
	m.Data = c.body
	if _, err := c.js.PublishMsg(ctx, m); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
