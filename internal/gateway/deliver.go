package gateway

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/jsretry"
)

// Delivery marks in the delivered bucket, per outbound id and channel.
const (
	// markClaimed: a gateway is sending it (refreshed while the send
	// runs; older than the ack wait = its gateway died). A channel that
	// sends it in parts adds how many are delivered: "claimed:2"; an id
	// whose earlier sends failed, how many failed: "claimed:0:3".
	markClaimed = "claimed"
	// markPartial: a send failed and is to be retried ("partial:2:1":
	// 2 parts delivered, 1 send failed): the next try claims it at once
	// and sends the rest, counting the failed sends against
	// GatewayMaxDeliver wherever it runs.
	markPartial = "partial"
	// markSent: the channel accepted it.
	markSent = "sent"
)

// mark is a claim's value: markClaimed or markPartial with the parts
// delivered and the sends that failed (trailing zeros left out).
func mark(kind string, parts, failed int) []byte {
	switch {
	case failed > 0:
		return []byte(kind + ":" + strconv.Itoa(parts) + ":" + strconv.Itoa(failed))
	case parts > 0:
		return []byte(kind + ":" + strconv.Itoa(parts))
	}
	return []byte(kind)
}

// parseMark splits a claim's value into its kind, parts and failed sends.
func parseMark(v []byte) (kind string, parts, failed int) {
	kind, rest, _ := strings.Cut(string(v), ":")
	p, f, _ := strings.Cut(rest, ":")
	parts, _ = strconv.Atoi(p)
	failed, _ = strconv.Atoi(f)
	return kind, max(parts, 0), max(failed, 0)
}

// delivery delivers the outbound envelopes of one channel: a pull loop
// spreading messages over lanes by subject (a session's messages all go
// to one lane, which keeps their order), each lane sending one message at
// a time.
type delivery struct {
	g         *Gateway
	channel   string
	sender    channels.Sender
	ackWait   time.Duration
	maxDlvr   int
	it        jetstream.MessagesContext
	stopWatch func()
	log       *slog.Logger
	lanes     []*lane
	seed      maphash.Seed
	stopping  atomic.Bool
	wg        sync.WaitGroup
}

// consumer creates or updates the shared consumer of channel, or with
// provisioning off checks it, then binds it.
func (g *Gateway) consumer(ctx context.Context, channel string) (jetstream.Consumer, error) {
	cfg := g.o.Topology.GatewayConsumer(g.o.Names, channel)
	stream := g.o.Names.OutboundStream()
	mode := natsx.Provision
	if g.o.Topology.NoProvision {
		mode = natsx.Check
	}
	var cons jetstream.Consumer
	err := natsx.Retry(ctx, g.o.Log, "consumer "+cfg.Durable, func(ctx context.Context) error {
		c, err := natsx.ApplyConsumer(ctx, g.o.JS, stream, cfg, mode, g.o.Log)
		if err == nil && mode == natsx.Check && c.Action != natsx.ActionUnchanged {
			return fmt.Errorf("%w (provisioning is off, BUB_PROVISION=false; run `bub provision --gateway-channel %s` or create it): consumer %s on stream %s: %s",
				natsx.ErrIncompatible, channel, cfg.Durable, stream, c)
		}
		if err == nil {
			cons, err = g.o.JS.Consumer(ctx, stream, cfg.Durable)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensuring consumer %s: %w", cfg.Durable, err)
	}
	return cons, nil
}

// deliver starts delivering the outbound envelopes of channel from cons
// with sender.
func (g *Gateway) deliver(ctx context.Context, channel string, sender channels.Sender, cons jetstream.Consumer) (*delivery, error) {
	o := g.o
	cfg := cons.CachedInfo().Config
	stopWatch, err := dlq.WatchMaxDeliveries(ctx, o.NC, o.JS, o.Names, o.Names.OutboundStream(), cfg.Durable, o.Log)
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jsretry.PullOptions(2 * o.Concurrency)...)
	if err != nil {
		stopWatch()
		return nil, fmt.Errorf("consuming outbound of %s: %w", channel, err)
	}
	d := &delivery{
		g: g, channel: channel, sender: sender,
		ackWait: cfg.AckWait, maxDlvr: cfg.MaxDeliver,
		it: it, stopWatch: stopWatch, seed: maphash.MakeSeed(),
		log:   o.Log.With("channel", channel),
		lanes: make([]*lane, o.Concurrency),
	}
	for i := range d.lanes {
		l := &lane{d: d, in: make(chan jetstream.Msg, 4), held: map[string]*held{}}
		d.lanes[i] = l
		d.wg.Go(l.run)
	}
	d.wg.Go(d.pull)
	d.log.InfoContext(ctx, "gateway.delivering", "consumer", cfg.Durable, "filter", cfg.FilterSubject)
	return d, nil
}

func (d *delivery) pull() {
	defer func() {
		for _, l := range d.lanes {
			close(l.in)
		}
	}()
	for {
		msg, err := d.it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			d.log.Warn("gateway.pull_error", "err", err)
			continue
		}
		d.lanes[maphash.String(d.seed, msg.Subject())%uint64(len(d.lanes))].in <- msg
	}
}

// stopIntake stops pulling; messages already pulled but not yet being
// sent are handed back.
func (d *delivery) stopIntake() {
	d.stopping.Store(true)
	d.it.Drain()
}

// wait waits until the sends in flight finished; when ctx ends first it
// cancels them (cancel) and waits for them to return.
func (d *delivery) wait(ctx context.Context, cancel context.CancelFunc) {
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		d.log.Warn("gateway.grace_expired", "action", "cancelling sends in flight")
		cancel()
		<-done
	}
	d.stopWatch()
}

// lane sends the messages hashed to it one at a time, in order per
// session (subject). A message whose send failed waits for its retry in
// the lane, with the later messages of its session queued behind it; the
// lane's other sessions go on meanwhile. (Handed back to the stream with a
// delayed nak, it would be overtaken by the session's next reply.) The
// held messages get an in-progress ack every keepAlive from a goroutine of
// their own, so a long send of another session does not let them expire.
type lane struct {
	d    *delivery
	in   chan jetstream.Msg
	mu   sync.Mutex       // held, which the keep-alive reads
	held map[string]*held // by subject
}

// held is a session's messages waiting for the retry of the first.
type held struct {
	msgs  []jetstream.Msg
	tries uint64 // sends of msgs[0] this lane made
	due   time.Time
	// sending: the lane is sending msgs[0] (its lease keeps it alive);
	// due does not apply.
	sending bool
}

func (l *lane) run() {
	stop := make(chan struct{})
	var keeper sync.WaitGroup
	keeper.Go(func() { l.keepAlive(stop) })
	defer func() { close(stop); keeper.Wait() }()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case msg, ok := <-l.in:
			if !ok {
				l.handBack()
				return
			}
			l.send(msg)
		case now := <-retry.C:
			for _, subject := range l.due(now) {
				l.resend(subject)
			}
		}
		retry.Reset(l.next())
	}
}

// send queues msg behind its session's held messages, or sends it now.
func (l *lane) send(msg jetstream.Msg) {
	subject := msg.Subject()
	l.mu.Lock()
	if h := l.held[subject]; h != nil {
		h.msgs = append(h.msgs, msg)
		l.mu.Unlock()
		return
	}
	l.held[subject] = &held{msgs: []jetstream.Msg{msg}}
	l.mu.Unlock()
	l.resend(subject)
}

// resend sends the held messages of subject in order until one fails
// (held until its next retry) or none is left.
func (l *lane) resend(subject string) {
	for {
		l.mu.Lock()
		h := l.held[subject]
		if len(h.msgs) == 0 {
			delete(l.held, subject)
			l.mu.Unlock()
			return
		}
		h.sending = true
		msg, tries := h.msgs[0], h.tries
		l.mu.Unlock()
		wait := l.d.handle(msg, tries)
		l.mu.Lock()
		h.sending = false
		if wait > 0 {
			h.tries, h.due = tries+1, time.Now().Add(wait)
			l.mu.Unlock()
			return
		}
		h.msgs, h.tries = h.msgs[1:], 0
		l.mu.Unlock()
	}
}

// due returns the subjects whose retry is due at now.
func (l *lane) due(now time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var subjects []string
	for subject, h := range l.held {
		if !h.due.After(now) {
			subjects = append(subjects, subject)
		}
	}
	return subjects
}

// next is how long until the next retry is due (an hour when none is).
func (l *lane) next() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := time.Hour
	for _, h := range l.held {
		next = min(next, time.Until(h.due))
	}
	return next
}

// keepAlive sends the held messages an in-progress ack every keepEvery
// until stop closes.
func (l *lane) keepAlive(stop <-chan struct{}) {
	t := time.NewTicker(l.d.keepEvery())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		for _, h := range l.held {
			msgs := h.msgs
			if h.sending {
				msgs = msgs[1:] // kept alive by its lease
			}
			for _, msg := range msgs {
				_ = msg.InProgress()
			}
		}
		l.mu.Unlock()
	}
}

// handBack hands the held messages back to the stream as the gateway
// stops, each session's due at its retry.
func (l *lane) handBack() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for subject, h := range l.held {
		for _, msg := range h.msgs {
			_ = msg.NakWithDelay(max(time.Until(h.due), 0))
		}
		delete(l.held, subject)
	}
}

// keepEvery is how often a message held in this gateway gets an
// in-progress ack (and a claim a refresh): a third of the ack wait.
func (d *delivery) keepEvery() time.Duration { return max(d.ackWait/3, 10*time.Millisecond) }

// handle delivers one outbound message: claim its id, send, mark it sent,
// acknowledge. Bad messages are dead-lettered. A failed send returns the
// delay after which to retry it (tries: the sends of msg the lane made
// before, beside its deliveries), or dead-letters it once the sends reach
// the consumer's max deliveries.
func (d *delivery) handle(msg jetstream.Msg, tries uint64) (retryIn time.Duration) {
	if d.stopping.Load() {
		_ = msg.Nak()
		return 0
	}
	ctx := d.g.sendCtx
	env, reason, err := decodeOutbound(msg.Headers(), msg.Data())
	if err != nil {
		if derr := d.g.dlq.Reject(ctx, msg, reason, err); derr != nil {
			d.log.Error("gateway.dlq_failed", "err", derr)
		}
		return 0
	}
	delivered := tries + 1
	if md, err := msg.Metadata(); err == nil {
		delivered = md.NumDelivered + tries
	}
	log := d.log.With("outbound", env.ID, "delivery", delivered)
	ctx, span := telemetry.StartReceive(ctx, msg.Headers(), msg.Subject(), env.ID)
	defer span.End()
	key := d.g.o.Names.DeliveredKey(d.channel, env.ID)
	c, err := d.claim(ctx, key)
	switch {
	case err != nil:
		telemetry.Fail(span, err)
		return d.retry(ctx, msg, delivered, fmt.Errorf("claiming outbound %s: %w", env.ID, err), log)
	case c.sent:
		log.DebugContext(ctx, "gateway.already_sent")
		d.ack(ctx, msg, log)
		return 0
	case c.busy > 0:
		// Another gateway's live claim (a copy of this id in flight there,
		// or a gateway that died sending it): held until the claim goes
		// stale, like a failed send, so the session's next reply waits.
		if d.last(delivered) {
			d.reject(ctx, msg, fmt.Errorf("outbound %s: another gateway's claim stayed live for %d tries", env.ID, delivered), log)
			return 0
		}
		log.DebugContext(ctx, "gateway.claimed_elsewhere", "retry_in", c.busy)
		return c.busy
	}
	// The sends an earlier gateway made and forgot (handed back as it
	// stopped) count too.
	delivered = max(delivered, uint64(c.failed)+1)
	lease := d.hold(msg, key, c, log)
	err = d.sender.Send(channels.WithProgress(ctx, lease), env)
	rev, parts := lease.release()
	if err != nil {
		telemetry.Fail(span, err)
		var wait time.Duration
		if errors.Is(err, channels.ErrUndeliverable) {
			d.reject(ctx, msg, err, log)
		} else {
			wait = d.retry(ctx, msg, delivered, err, log)
		}
		failed := 0 // dead-lettered: a later copy starts afresh
		if wait > 0 {
			failed = int(delivered)
		}
		var derr error
		if parts > 0 || failed > 0 { // the parts delivered stay delivered
			_, derr = d.g.kv.Update(ctx, key, mark(markPartial, parts, failed), rev)
		} else {
			derr = d.g.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		}
		if derr != nil {
			log.Warn("gateway.unclaim_failed", "err", derr)
		}
		return wait
	}
	if _, err := d.g.kv.Update(ctx, key, []byte(markSent), rev); err != nil {
		// The claim stays and goes stale: a later copy of this id would be
		// sent again (doc.go, "Delivery guarantee").
		log.Warn("gateway.mark_sent_failed", "err", err)
	}
	d.ack(ctx, msg, log)
	return 0
}

func (d *delivery) ack(ctx context.Context, msg jetstream.Msg, log *slog.Logger) {
	if err := msg.DoubleAck(ctx); err != nil {
		log.Warn("gateway.ack_failed", "err", err)
	}
}

// retry returns when to send msg again (exponential backoff), or
// dead-letters it on its last delivery and returns 0.
func (d *delivery) retry(ctx context.Context, msg jetstream.Msg, delivered uint64, err error, log *slog.Logger) time.Duration {
	if d.last(delivered) {
		d.reject(ctx, msg, err, log)
		return 0
	}
	delay := min(d.g.o.RetryDelay<<min(delivered-1, 16), time.Minute)
	if ra, ok := errors.AsType[channels.RetryAfter](err); ok {
		// A rate limit: sending sooner fails again and prolongs it.
		delay = max(delay, ra.Wait())
	}
	log.Warn("gateway.send_failed", "err", err, "retry_in", delay)
	return delay
}

// last reports whether delivered tries reached the consumer's max
// deliveries.
func (d *delivery) last(delivered uint64) bool {
	return d.maxDlvr > 0 && delivered >= uint64(d.maxDlvr)
}

func (d *delivery) reject(ctx context.Context, msg jetstream.Msg, err error, log *slog.Logger) {
	if derr := d.g.dlq.Reject(ctx, msg, dlq.ReasonSendFailed, err); derr != nil {
		log.Error("gateway.dlq_failed", "err", derr)
	}
}

// claimed is the outcome of a claim: the claim's revision, the parts
// an earlier send delivered and the earlier sends that failed, or the id
// was already sent, or another gateway holds a live claim (retry after
// busy).
type claimed struct {
	rev    uint64
	parts  int
	failed int
	sent   bool
	busy   time.Duration
}

// claim claims key for this gateway with compare-and-set: a new claim, or
// the takeover of a claim that was not refreshed for an ack wait (its
// gateway died).
func (d *delivery) claim(ctx context.Context, key string) (claimed, error) {
	for range 3 {
		rev, err := d.g.kv.Create(ctx, key, mark(markClaimed, 0, 0))
		if err == nil {
			return claimed{rev: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return claimed{}, err
		}
		e, err := d.g.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return claimed{}, err
		}
		kind, parts, failed := parseMark(e.Value())
		if kind == markSent {
			return claimed{sent: true}, nil
		}
		if age := time.Since(e.Created()); kind != markPartial && age < d.ackWait {
			return claimed{busy: d.ackWait - age}, nil
		}
		rev, err = d.g.kv.Update(ctx, key, mark(markClaimed, parts, failed), e.Revision())
		if err == nil {
			if kind != markPartial {
				d.log.Warn("gateway.claim_taken_over", "key", key, "stale_for", time.Since(e.Created()))
			}
			return claimed{rev: rev, parts: parts, failed: failed}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return claimed{}, err
		}
	}
	return claimed{busy: d.g.o.RetryDelay}, nil
}

// lease keeps a claim and its message alive while the send runs: every
// third of the ack wait it refreshes the claim (so no other gateway takes
// it over) and sends an in-progress ack (so it is not redelivered). It is
// the send's channels.Progress: the parts delivered are written to the
// claim as they are.
type lease struct {
	d      *delivery
	key    string
	log    *slog.Logger
	every  time.Duration
	sent   int // the parts an earlier send delivered
	failed int // the earlier sends that failed

	mu      sync.Mutex
	rev     uint64
	parts   int
	stopped bool
	t       *time.Timer
}

var _ channels.Progress = (*lease)(nil)

func (d *delivery) hold(msg jetstream.Msg, key string, c claimed, log *slog.Logger) *lease {
	l := &lease{d: d, key: key, log: log, every: d.keepEvery(), sent: c.parts, failed: c.failed, rev: c.rev, parts: c.parts}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t = time.AfterFunc(l.every, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.stopped {
			return
		}
		_ = msg.InProgress()
		l.write(l.d.g.sendCtx)
		l.t.Reset(l.every)
	})
	return l
}

// write rewrites the claim with the parts delivered (l.mu held).
func (l *lease) write(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, l.every)
	defer cancel()
	if rev, err := l.d.g.kv.Update(ctx, l.key, mark(markClaimed, l.parts, l.failed), l.rev); err == nil {
		l.rev = rev
	} else {
		l.log.Warn("gateway.claim_refresh_failed", "err", err)
	}
}

// Sent is how many parts an earlier send delivered.
func (l *lease) Sent() int { return l.sent }

// Delivered records that the first n parts are delivered.
func (l *lease) Delivered(ctx context.Context, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || n <= l.parts {
		return
	}
	l.parts = n
	l.write(context.WithoutCancel(ctx))
}

// release stops refreshing and returns the claim's current revision and
// the parts delivered.
func (l *lease) release() (uint64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.t.Stop()
	return l.rev, l.parts
}

// decodeOutbound decodes an outbound message: a CloudEvent of type
// dev.bub.envelope.outbound.v1 whose data is an envelope with an id (the
// event id when the data has none). It returns the dead-letter reason with
// the error.
func decodeOutbound(header map[string][]string, data []byte) (*envelope.Envelope, string, error) {
	ev, err := events.Decode(header, data)
	if err != nil {
		return nil, dlq.ReasonUndecodable, err
	}
	if ev.Type() != events.TypeEnvelopeOutbound {
		return nil, dlq.ReasonUnknownType, fmt.Errorf("event type %q is not %s", ev.Type(), events.TypeEnvelopeOutbound)
	}
	var env envelope.Envelope
	if err := events.DecodeData(ev, &env); err != nil {
		return nil, dlq.ReasonInvalid, err
	}
	if env.ID == "" {
		env.ID = ev.ID()
	}
	if env.ID == "" {
		return nil, dlq.ReasonInvalid, envelope.ErrNoID
	}
	return &env, "", nil
}
