package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// Inbound is one delivery of an inbound envelope.
type Inbound struct {
	Envelope *envelope.Envelope
	// Delivery counts deliveries of this message (1 = first).
	Delivery uint64
	// StreamSeq is the inbound stream sequence of the message.
	StreamSeq uint64
	// Arrived is the inbound stream sequence at which a steering message
	// re-injected as a follow-up first arrived (its Bub-Arrived header,
	// see [Arrived]); 0 for a message that arrived as itself, at
	// StreamSeq.
	Arrived uint64
	// Traceparent and Tracestate carry the W3C trace context of the sender.
	Traceparent, Tracestate string
	// Admission is a decision forced by the Bub-Admission header ("" for
	// none), e.g. "follow_up" on a late steering message re-injected.
	Admission string
	// Session is the message's session once resolved: the admission gate
	// resolves it to decide the admission and passes it on, so the turn
	// does not resolve it again ("" = not resolved yet).
	Session string
	// Steering is the steering inbox of the turn, nil for none: the
	// admission gate gives each turn it runs one.
	Steering hooks.Steering
	// Admitted, when not nil, returns once the turn may start its first
	// stage (the admission gate registered it meanwhile), with an error
	// wrapping [ErrRetry] when it may not. The runtime calls it after its
	// own reads of the session, so the two overlap.
	Admitted func() error
	// Stopping is closed when the worker starts draining: a turn still
	// waiting to start should hand its message back.
	Stopping <-chan struct{}
}

// Processor runs the turn of one inbound envelope. It returns nil when the
// turn is finished and everything it produced is durably published (the
// inbound message is then acknowledged). An error wrapping [ErrRetry]
// hands the message back for redelivery; any other error is a turn
// failure that was already reported to the user, so the message is
// acknowledged.
type Processor interface {
	Process(ctx context.Context, in Inbound) error
}

// ErrRetry marks a failure of infrastructure (publishing, flushing) after
// which the inbound message must be redelivered rather than acknowledged.
var ErrRetry = errors.New("retry")

// Config configures a worker. The zero value means the documented
// defaults.
type Config struct {
	// Concurrency bounds turns in flight in this worker (256).
	Concurrency int
	// ProgressEvery is the in-progress ack period (ack wait / 3).
	ProgressEvery time.Duration
	// ShutdownGrace bounds how long shutdown waits for running turns
	// before handing them back (30s).
	ShutdownGrace time.Duration
}

func (c Config) withDefaults(ackWait time.Duration) Config {
	if c.Concurrency == 0 {
		c.Concurrency = 256
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = max(ackWait/3, 100*time.Millisecond)
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	return c
}

// Validate reports impossible settings.
func (c Config) Validate() error {
	if c.Concurrency < 0 {
		return errors.New("worker concurrency must be positive")
	}
	return nil
}

// Worker consumes inbound envelopes.
type Worker struct {
	cfg     Config
	js      jetstream.JetStream
	names   subjects.Names
	proc    Processor
	dlq     *dlq.Writer
	log     *slog.Logger
	maxDlvr int

	// running and concurrency are the turns in flight and their bound,
	// for [Worker.Load].
	running, concurrency atomic.Int64
}

// New returns a worker running proc for every inbound envelope.
func New(cfg Config, js jetstream.JetStream, names subjects.Names, proc Processor, log *slog.Logger) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{cfg: cfg, js: js, names: names, proc: proc, dlq: dlq.NewWriter(js, names, log), log: log}, nil
}

// Run consumes until ctx ends, then drains: it stops pulling, lets running
// turns finish within the grace period, and hands back (naks) those that
// do not.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := jsretry.Consumer(ctx, w.js, w.names.InboundStream(), w.names.WorkerConsumer())
	if err != nil {
		return fmt.Errorf("binding worker consumer: %w", err)
	}
	info := cons.CachedInfo()
	w.maxDlvr = info.Config.MaxDeliver
	cfg := w.cfg.withDefaults(info.Config.AckWait)
	w.concurrency.Store(int64(cfg.Concurrency))
	turnCtx, cancelTurns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTurns()
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	stopping := make(chan struct{})
	go func() {
		<-ctx.Done()
		close(stopping)
	}()
	w.log.Info("worker.consuming", "stream", w.names.InboundStream(), "consumer", w.names.WorkerConsumer(), "concurrency", cfg.Concurrency)
	var stopped error // why consuming stopped while ctx lives
	retry := jsretry.Backoff{First: 50 * time.Millisecond, Max: time.Second}
	for failures := 0; ctx.Err() == nil; {
		// Pull as many messages as there are free turn slots, never more:
		// a message pulled ahead of a slot would wait, with no in-progress
		// acks, for a slot that may stay taken past the ack wait, be
		// redelivered to another worker meanwhile, and then run here too
		// (a first delivery is not checked for a done marker).
		n := takeSlots(ctx, sem)
		if n == 0 {
			break
		}
		got, err := w.fetch(ctx, cons, n, func(msg jetstream.Msg) {
			w.running.Add(1)
			wg.Go(func() {
				s := &slot{sem: sem, running: &w.running}
				defer s.done()
				w.handle(withSlot(turnCtx, s), cfg, msg, stopping)
			})
		})
		for range n - got {
			<-sem
		}
		switch {
		case err == nil, ctx.Err() != nil:
			failures = 0
		case errors.Is(err, jetstream.ErrConsumerDeleted):
			stopped = fmt.Errorf("consuming inbound stopped: %w", err)
		default:
			w.log.Warn("worker.pull_error", "err", err)
			failures++
			_ = retry.Sleep(ctx, failures)
		}
		if stopped != nil {
			break
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.ShutdownGrace):
		w.log.Warn("worker.grace_expired", "action", "handing back running turns")
		cancelTurns()
		<-done
	}
	return stopped
}

// takeSlots waits for a free turn slot and takes it with every other free
// one, and returns how many it took (0 once ctx ended).
func takeSlots(ctx context.Context, sem chan struct{}) int {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	for n := 1; ; n++ {
		select {
		case sem <- struct{}{}:
		default:
			return n
		}
	}
}

// fetch pulls up to n messages for at most jsretry.PullExpiry (with
// heartbeats, so a lost consumer leader is noticed within two of them),
// hands each to start as it arrives, and returns how many it started and
// why the pull ended early (nil at its expiry or once n came). A message
// that arrives once ctx ended is handed back at once.
func (w *Worker) fetch(ctx context.Context, cons jetstream.Consumer, n int, start func(jetstream.Msg)) (int, error) {
	fctx, cancel := context.WithTimeout(ctx, jsretry.PullExpiry)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(fctx), jetstream.FetchHeartbeat(jsretry.PullHeartbeat))
	if err != nil {
		return 0, err
	}
	got := 0
	for msg := range batch.Messages() {
		if ctx.Err() != nil {
			_ = msg.Nak() // draining
			continue
		}
		got++
		start(msg)
	}
	if err := batch.Error(); err != nil && fctx.Err() == nil {
		return got, err
	}
	return got, nil
}

// Load returns the turns the worker runs now and how many it runs at
// most (0 before [Worker.Run] consumes).
func (w *Worker) Load() (running, concurrency int) {
	return int(w.running.Load()), int(w.concurrency.Load())
}

// doubleAck acknowledges msg and waits for the server's confirmation,
// riding out a consumer leader election (an ack nobody answers, "no
// responders" while the consumer has no leader): an ack lost there would
// redeliver a finished turn after the ack wait. Acknowledging again is
// harmless.
func doubleAck(ctx context.Context, msg jetstream.Msg) error {
	return jsretry.Read(ctx, msg.DoubleAck)
}

func (w *Worker) handle(ctx context.Context, cfg Config, msg jetstream.Msg, stopping <-chan struct{}) {
	// What happens to msg once its turn ended is done whatever ended the
	// turn: a turn that finished as the shutdown grace ran out is still
	// acknowledged (its done marker is stored already).
	actx := context.WithoutCancel(ctx)
	in, reason, err := decode(msg)
	if err != nil {
		if derr := w.dlq.Reject(actx, msg, reason, err); derr != nil {
			w.log.Error("worker.dlq_failed", "err", derr)
		}
		return
	}
	in.Stopping = stopping
	log := w.log.With("envelope", in.Envelope.ID, "delivery", in.Delivery)
	stop := keepAlive(msg, cfg.ProgressEvery)
	err = w.proc.Process(ctx, in)
	stop()
	switch {
	case err == nil:
		if aerr := doubleAck(actx, msg); aerr != nil {
			log.Warn("worker.ack_failed", "err", aerr)
		}
	case errors.Is(err, ErrRetry) || ctx.Err() != nil:
		if w.maxDlvr > 0 && in.Delivery >= uint64(w.maxDlvr) {
			if derr := w.dlq.Reject(actx, msg, dlq.ReasonMaxDelivered, err); derr != nil {
				log.Error("worker.dlq_failed", "err", derr)
			}
			return
		}
		delay := handBackDelay(in.Delivery)
		log.Warn("worker.turn_handed_back", "err", err, "redelivery_in", delay)
		_ = msg.NakWithDelay(delay)
	default:
		log.Warn("worker.turn_failed", "err", err)
		if errors.Is(err, nats.ErrMaxPayload) {
			// Answered, and kept for a replay once the server takes it
			// (see retryUnlessTooLarge).
			if derr := w.dlq.Reject(actx, msg, dlq.ReasonPayloadTooLarge, err); derr != nil {
				log.Error("worker.dlq_failed", "err", derr)
			}
		} else if aerr := doubleAck(actx, msg); aerr != nil {
			log.Warn("worker.ack_failed", "err", aerr)
		}
	}
}

// handBackDelay is how long a turn handed back at its delivery-th
// delivery waits for its next: 1s, doubled per delivery up to 8s, so the
// default five deliveries span 15s and a turn that keeps meeting a
// cluster's leader election (4–9s) outlasts it instead of being
// dead-lettered.
func handBackDelay(delivery uint64) time.Duration {
	return time.Second << min(max(delivery, 1)-1, 3)
}

// keepAlive sends in-progress acks every period until stop is called,
// from a timer rather than a goroutine of its own (a worker may hold
// thousands of turns). No ack is sent once stop returned.
func keepAlive(msg jetstream.Msg, every time.Duration) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = msg.InProgress()
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// Arrived returns the inbound stream sequence a message's Bub-Arrived
// header names (subjects.HeaderArrived), 0 when it names none.
func Arrived(h nats.Header) uint64 {
	seq, _ := strconv.ParseUint(h.Get(subjects.HeaderArrived), 10, 64)
	return seq
}

func decode(msg jetstream.Msg) (Inbound, string, error) {
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		return Inbound{}, dlq.ReasonUndecodable, err
	}
	if ev.Type() != events.TypeEnvelopeInbound {
		return Inbound{}, dlq.ReasonUnknownType, fmt.Errorf("event type %q is not %s", ev.Type(), events.TypeEnvelopeInbound)
	}
	var env envelope.Envelope
	if err := events.DecodeData(ev, &env); err != nil {
		return Inbound{}, dlq.ReasonInvalid, err
	}
	if env.ID == "" {
		env.ID = ev.ID()
	}
	if err := env.Validate(); err != nil {
		return Inbound{}, dlq.ReasonInvalid, err
	}
	in := Inbound{Envelope: &env, Admission: msg.Headers().Get(subjects.HeaderAdmission)}
	if md, err := msg.Metadata(); err == nil {
		in.Delivery = md.NumDelivered
		in.StreamSeq = md.Sequence.Stream
	}
	in.Arrived = Arrived(msg.Headers())
	in.Traceparent, in.Tracestate = events.Traceparent(ev)
	return in, "", nil
}
