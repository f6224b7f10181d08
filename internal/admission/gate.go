package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/replies"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/pipeline"
	"github.com/bubbus/bub/pkg/subjects"
)

const (
	process  = hooks.AdmitProcess
	drop     = hooks.AdmitDrop
	followUp = hooks.AdmitFollowUp
	steer    = hooks.AdmitSteer
)

// Hooks is the part of the hook registry admission dispatches.
// *hooks.Registry implements it.
type Hooks interface {
	ResolveSession(ctx context.Context, in hooks.ResolveSessionInput) (string, error)
	AdmitMessage(ctx context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, error)
	NotifyError(ctx context.Context, in hooks.OnErrorInput)
	// MayAdmit reports whether an admit_message implementation may
	// decide msg's admission: when none may, the message is processed
	// and its turn pays for no snapshot and no steering read (see decide).
	MayAdmit(msg *envelope.Envelope) bool
}

// Options configure [NewGate].
type Options struct {
	JS    jetstream.JetStream
	Names subjects.Names
	// Source is the CloudEvent source of the events the gate publishes.
	Source string
	// Hooks resolve sessions and decide admissions.
	Hooks Hooks
	// Outbox answers dropped messages (worker.Runtime implements it).
	Outbox builtin.Outbox
	// Next runs admitted turns (the worker's runtime).
	Next worker.Processor
	// TTL of registry keys (30s): how long a dead worker's turns count.
	TTL time.Duration
	// DoneTTL of done markers (1h).
	DoneTTL time.Duration
	// Owner names this worker in registry entries.
	Owner string
	Log   *slog.Logger
}

// Gate admits inbound envelopes before the runtime runs them; it is the
// worker's [worker.Processor].
type Gate struct {
	o     Options
	reg   *Registry
	steer *Steering
	log   *slog.Logger
	local local              // this worker's turns and follow-ups, for quit
	quit  *nats.Subscription // the quit broadcasts
}

var _ worker.Processor = (*Gate)(nil)

// NewGate binds the turn registry and the steering stream.
func NewGate(ctx context.Context, o Options) (*Gate, error) {
	var errs []error
	if o.JS == nil {
		errs = append(errs, errors.New("admission: jetstream is required"))
	}
	if o.Hooks == nil || o.Outbox == nil || o.Next == nil {
		errs = append(errs, errors.New("admission: hooks, outbox and next processor are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	reg, err := NewRegistry(ctx, o.JS, o.Names, RegistryOptions{TTL: o.TTL, DoneTTL: o.DoneTTL, Log: o.Log})
	if err != nil {
		return nil, err
	}
	g := &Gate{o: o, reg: reg, steer: NewSteering(o.JS, o.Names, reg, o.Source, o.Log), log: o.Log}
	if g.quit, err = o.JS.Conn().Subscribe(o.Names.ControlQuitAll(), g.onQuit); err != nil {
		reg.Close()
		return nil, fmt.Errorf("admission: subscribing to quit broadcasts: %w", err)
	}
	return g, nil
}

// Close stops the gate's quit subscription, registry mirror and
// heartbeats (after the worker stopped calling Process).
func (g *Gate) Close() {
	_ = g.quit.Unsubscribe()
	g.reg.Close()
}

// Registry returns the gate's turn registry.
func (g *Gate) Registry() *Registry { return g.reg }

// Steering returns the gate's steering queue.
func (g *Gate) Steering() *Steering { return g.steer }

// Process admits one inbound envelope and runs, queues, steers or drops
// it. Registry failures wrap worker.ErrRetry (the message is redelivered).
func (g *Gate) Process(ctx context.Context, in worker.Inbound) error {
	env := in.Envelope
	log := g.log.With("envelope", env.ID, "delivery", in.Delivery)
	ctx = replies.Collect(ctx)    // the replies the done marker points to
	var decided hooks.AdmitAction // a redelivery's earlier steer or drop
	if in.Delivery > 1 {
		done, err := g.reg.Done(ctx, env.ID)
		if err != nil {
			return retry("reading the done marker", err)
		}
		if done {
			log.Info("admission.already_done")
			return nil
		}
		// Steered into a running turn before: that turn took it, or its
		// end re-injects it as a forced follow-up (which carries
		// in.Admission and is not skipped here). Dropped before: dropped
		// again below (its event and reply keep their ids).
		if in.Admission == "" {
			if decided, err = g.reg.decided(ctx, env.ID); err != nil {
				return retry("reading the admission decision", err)
			}
			if decided == steer {
				log.Info("admission.already_steered")
				return nil
			}
		}
	}
	session, err := g.o.Hooks.ResolveSession(ctx, hooks.ResolveSessionInput{Message: env})
	if err != nil {
		log.Warn("admission.resolve_failed", "err", err)
		g.o.Hooks.NotifyError(ctx, hooks.OnErrorInput{Stage: string(hooks.HookResolveSession), Err: err, Message: env})
		return g.finish(ctx, env.ID, nil)
	}
	if env.SessionID == "" {
		env.SessionID = session
	}
	log = log.With("session", session)
	if quit, left, err := g.quitBefore(ctx, in, session); err != nil {
		return err
	} else if quit {
		// Handed back, or delivered late, after a ,quit that came after
		// it: dropped, and the keys its earlier delivery left go.
		return g.dropQuit(ctx, in, session, left...)
	}
	if decided == drop {
		return g.drop(ctx, session, env)
	}
	action, snap, err := g.decide(ctx, in, session)
	if err != nil {
		return err
	}
	log.Debug("admission.decided", "action", action, "running", snap.RunningCount, "pending", snap.PendingCount, "steering", snap.SteeringCount)
	switch action {
	case drop:
		return g.drop(ctx, session, env)
	case steer:
		if snap.IsRunning {
			return g.steerInto(ctx, session, env, arrived(in))
		}
		return g.followUp(ctx, in, session, snap)
	case followUp:
		return g.followUp(ctx, in, session, snap)
	default:
		return g.run(ctx, in, session, nil)
	}
}

// decide returns the admission decision: a sticky one when an earlier
// delivery of this envelope registered a run or wait key, a forced one
// from the Bub-Admission header, else admit_message's.
func (g *Gate) decide(ctx context.Context, in worker.Inbound, session string) (hooks.AdmitAction, hooks.TurnSnapshot, error) {
	env := in.Envelope
	if in.Admission == "" && !g.o.Hooks.MayAdmit(env) && !g.reg.anyQueued(session) {
		// Nothing may decide admission and no steering message waits: the
		// message is processed, and no snapshot is needed to say so
		// (the registry still learns of the turn: quit and other
		// workers' follow-ups wait for its run key).
		action, snap, err := g.sticky(ctx, in, session, hooks.TurnSnapshot{SessionID: session})
		if err == nil && action == "" {
			action = process
		}
		return action, snap, err
	}
	snap, err := g.Snapshot(ctx, session, env.ID, in.StreamSeq)
	if err != nil {
		return "", snap, retry("taking the turn snapshot", err)
	}
	if action, _, err := g.sticky(ctx, in, session, snap); err != nil || action != "" {
		return action, snap, err
	}
	if in.Admission == string(followUp) {
		return followUp, snap, nil
	}
	if !snap.IsRunning && snap.SteeringCount > 0 {
		// Steering messages whose turn ended without taking them (and
		// whose sweep did not happen, e.g. the worker died): follow-ups.
		if _, err := g.steer.Sweep(ctx, session); err != nil {
			g.log.Warn("admission.sweep_failed", "session", session, "err", err)
		}
	}
	d, err := g.o.Hooks.AdmitMessage(ctx, hooks.AdmitMessageInput{SessionID: session, Message: env, Turn: snap})
	if err != nil {
		g.log.Warn("admission.admit_failed", "envelope", env.ID, "err", err)
		g.o.Hooks.NotifyError(ctx, hooks.OnErrorInput{Stage: string(hooks.HookAdmitMessage), Err: err, Message: env})
		return process, snap, nil
	}
	switch d.Action {
	case process, drop, followUp, steer:
		return d.Action, snap, nil
	case "":
		return process, snap, nil
	default:
		g.log.Warn("admission.unknown_action", "action", d.Action, "envelope", env.ID)
		return process, snap, nil
	}
}

// sticky returns the decision an earlier delivery of the envelope made
// (it registered a run or wait key), "" on a first delivery or when none
// did: the registry reads happen only on a redelivery.
func (g *Gate) sticky(ctx context.Context, in worker.Inbound, session string, snap hooks.TurnSnapshot) (hooks.AdmitAction, hooks.TurnSnapshot, error) {
	if in.Delivery <= 1 {
		return "", snap, nil
	}
	if _, ok, err := g.reg.exists(ctx, g.o.Names.TurnRunKey(session, in.Envelope.ID)); err != nil {
		return "", snap, retry("reading the turn registry", err)
	} else if ok {
		return process, snap, nil
	}
	if _, ok, err := g.reg.exists(ctx, g.o.Names.TurnWaitKey(session, in.StreamSeq)); err != nil {
		return "", snap, retry("reading the turn registry", err)
	} else if ok {
		return followUp, snap, nil
	}
	return "", snap, nil
}

// Snapshot computes admit_message's view of session, leaving out the
// envelope being admitted (its own earlier delivery) and its wait key.
func (g *Gate) Snapshot(ctx context.Context, session, self string, selfSeq uint64) (hooks.TurnSnapshot, error) {
	snap := hooks.TurnSnapshot{SessionID: session}
	k, _, err := g.reg.keys(ctx, session)
	if err != nil {
		return snap, err
	}
	delete(k.run, g.o.Names.TurnRunKey(session, self))
	if selfSeq > 0 {
		delete(k.wait, g.o.Names.TurnWaitKey(session, selfSeq))
	}
	snap.RunningCount, snap.PendingCount, snap.SteeringCount = len(k.run), len(k.wait), len(k.queued)
	snap.IsRunning = snap.RunningCount > 0
	return snap, nil
}

// drop records the decision and tells the sender.
func (g *Gate) drop(ctx context.Context, session string, env *envelope.Envelope) error {
	if err := g.reg.markDecided(ctx, env.ID, drop); err != nil {
		return retry("recording the drop decision", err)
	}
	if err := g.dropped(ctx, session, env, string(hooks.HookAdmitMessage)); err != nil {
		return err
	}
	out := &envelope.Envelope{
		SessionID: session,
		Channel:   env.ChannelOrDefault(),
		ChatID:    env.ChatIDOrDefault(),
		Content:   "Message dropped: the session is busy (admit_message decided drop).",
		Kind:      envelope.KindError,
	}
	out.OutputChannel = env.OutputChannel
	if out.OutputChannel == "" {
		out.OutputChannel = out.Channel
	}
	pipeline.Address(out, env, 0, 1)
	if err := g.o.Outbox.Send(ctx, out); err != nil {
		return retry("answering a dropped message", err)
	}
	g.log.Info("admission.dropped", "session", session, "envelope", env.ID)
	return g.finish(ctx, env.ID, nil)
}

// dropped publishes turn.dropped: env will not run, for reason.
func (g *Gate) dropped(ctx context.Context, session string, env *envelope.Envelope, reason string) error {
	data := events.TurnDroppedData{EnvelopeID: env.ID, Reason: reason}
	ev, err := events.New(events.TypeTurnDropped, events.Attrs{ID: env.ID + "/dropped", Source: g.o.Source, SessionID: session}, data)
	if err != nil {
		return err
	}
	msg, err := events.ToMsg(g.o.Names.Event(session, events.SubjectName(events.TypeTurnDropped)), ev)
	if err != nil {
		return err
	}
	if _, err := g.o.JS.PublishMsg(ctx, msg); err != nil {
		return retry("publishing turn.dropped", err)
	}
	return nil
}

// steerInto queues env, arrived at inbound sequence at, for the session's
// running turn. When the turn ended meanwhile, the sweep makes it a
// follow-up.
func (g *Gate) steerInto(ctx context.Context, session string, env *envelope.Envelope, at uint64) error {
	if err := g.steer.Publish(ctx, session, env, at); err != nil {
		return retry("steering", err)
	}
	if err := g.reg.markDecided(ctx, env.ID, steer); err != nil {
		return retry("recording the steer decision", err)
	}
	g.log.Info("admission.steered", "session", session, "envelope", env.ID)
	g.sweepIfIdle(ctx, session)
	return nil
}

// followUp waits until the session is free, then runs the turn. A session
// with no running turn and no waiting follow-up runs it at once.
func (g *Gate) followUp(ctx context.Context, in worker.Inbound, session string, snap hooks.TurnSnapshot) error {
	if !snap.IsRunning && snap.PendingCount == 0 {
		return g.run(ctx, in, session, nil)
	}
	key := g.o.Names.TurnWaitKey(session, in.StreamSeq)
	wait, err := g.reg.hold(ctx, key, entry{Envelope: in.Envelope.ID, Seq: in.StreamSeq, Owner: g.o.Owner, Since: time.Now().UTC()})
	if err != nil {
		return retry("queueing a follow-up", err)
	}
	g.log.Info("admission.follow_up_queued", "session", session, "envelope", in.Envelope.ID, "seq", in.StreamSeq)
	wctx, untrack := g.local.track(ctx, session, in.Envelope.ID, arrived(in))
	err = g.reg.awaitTurn(wctx, session, key, in.Stopping)
	quit := errors.Is(context.Cause(wctx), worker.ErrQuit)
	untrack()
	switch {
	case quit:
		// ,quit cleared the session's follow-ups: this one never runs.
		wait.stop()
		return g.dropQuit(context.WithoutCancel(ctx), in, session, key)
	case err != nil:
		wait.stop() // keep the key: the redelivered message takes it over
		return retry("waiting for the session", err)
	}
	return g.run(ctx, in, session, wait)
}

// run registers the turn as running, runs it with its resolved session
// and the session's steering inbox, and afterwards commits or releases
// what it took. wait, when not nil, is the follow-up's wait key, removed
// once the run key exists.
//
// The run key is written while the runtime does its own reads of the
// session (read-your-writes, worker.Inbound.Admitted): both come before
// the turn's first stage, and neither needs the other. Quit can stop the
// turn once its key is stored, as when the write came first.
func (g *Gate) run(ctx context.Context, in worker.Inbound, session string, wait *lease) error {
	env := in.Envelope
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		l       *lease
		herr    error
		untrack = func() {}
		held    = make(chan struct{})
		at      = arrived(in)
	)
	go func() {
		defer close(held)
		l, herr = g.reg.hold(ctx, g.o.Names.TurnRunKey(session, env.ID), entry{Envelope: env.ID, Seq: in.StreamSeq, Owner: g.o.Owner, Since: time.Now().UTC()})
		if herr != nil {
			herr = retry("registering the turn", herr)
			cancel(herr)
			return
		}
		untrack = g.local.add(session, env.ID, tracked{at, cancel})
		before := g.reg.live.quitAt(session)
		if stop, _ := g.reg.quitStops(ctx, session, env.ID, at, before); stop {
			cancel(quitCause{before}) // a ,quit after it came first
		}
		if wait != nil {
			wait.end(ctx)
		}
	}()
	inbox := g.steer.Inbox(session, env.ID)
	in.Session, in.Steering = session, inbox
	in.Admitted = func() error { <-held; return herr }
	err := g.o.Next.Process(tctx, in)
	<-held
	quit := errors.Is(context.Cause(tctx), worker.ErrQuit)
	untrack()
	if herr != nil {
		if wait != nil {
			wait.stop()
		}
		inbox.Release()
		return herr
	}
	cctx := context.WithoutCancel(ctx)
	if !quit && (errors.Is(err, worker.ErrRetry) || ctx.Err() != nil) {
		inbox.Release()
		// Keep the key, as a dead worker's stays: the redelivered message
		// takes it over (admitted, it is not decided again), and the
		// session's follow-ups wait for it meanwhile.
		l.stop()
		return err
	}
	var stopped quitCause // the quit's: what of the steering it stops
	errors.As(context.Cause(tctx), &stopped)
	if cerr := inbox.Commit(cctx, stopped.before); cerr != nil {
		g.log.Warn("admission.steer_commit_failed", "session", session, "err", cerr)
	}
	if quit {
		// Stopped by ,quit: finished, never run again. The done marker
		// comes before the run key goes, which is what quit waits for.
		err = g.finish(cctx, env.ID, nil)
		l.end(cctx)
		g.sweepIfIdle(cctx, session)
		return err
	}
	g.sweepAfter(cctx, session, env, l.end(cctx))
	return g.finish(cctx, env.ID, err)
}

// arrived is the inbound sequence at which the message of in first
// arrived (worker.Inbound.Arrived, else its own).
func arrived(in worker.Inbound) uint64 { return cmp.Or(in.Arrived, in.StreamSeq) }

// quitBefore reports whether a ,quit of session that came after the
// message of in stops it (see subjects.Names.QuitKey), and which registry
// keys an earlier delivery of it left (its run or wait key). A first
// delivery asks the mirror as far as it has seen (free, and it left no
// key); a redelivery, which may be a turn handed back during the quit,
// asks it exactly (one direct get).
func (g *Gate) quitBefore(ctx context.Context, in worker.Inbound, session string) (stop bool, left []string, err error) {
	at := g.reg.live.quitAt(session)
	var k sessionKeys
	if in.Delivery > 1 {
		if k, _, err = g.reg.keys(ctx, session); err != nil {
			return false, nil, retry("reading the turn registry", err)
		}
		at = k.quitAt()
	}
	if stop, err = g.reg.quitStops(ctx, session, in.Envelope.ID, arrived(in), at); err != nil {
		return false, nil, retry("reading the quit marker", err)
	}
	if !stop {
		return false, nil, nil
	}
	if key := g.o.Names.TurnRunKey(session, in.Envelope.ID); k.run[key] {
		left = append(left, key)
	}
	if key := g.o.Names.TurnWaitKey(session, in.StreamSeq); k.wait[key] {
		left = append(left, key)
	}
	return true, left, nil
}

// dropQuit ends the turn or follow-up of in, stopped by ,quit before it
// ran: turn.dropped with reason "quit" and the done marker, then the
// removal of the registry keys it left (what Quit waits for).
func (g *Gate) dropQuit(ctx context.Context, in worker.Inbound, session string, left ...string) error {
	if err := g.dropped(ctx, session, in.Envelope, "quit"); err != nil {
		return err
	}
	err := g.finish(ctx, in.Envelope.ID, nil)
	for _, key := range left {
		if _, perr := g.reg.purge(ctx, key); perr != nil {
			g.log.Warn("admission.unregister_failed", "key", key, "err", perr)
		}
	}
	g.log.Info("admission.quit_dropped", "session", session, "envelope", in.Envelope.ID)
	return err
}

// finish writes the done marker of an envelope about to be acknowledged,
// with the replies the turn sent (recorded in ctx), and passes err
// through.
func (g *Gate) finish(ctx context.Context, envelopeID string, err error) error {
	if merr := g.reg.MarkDone(ctx, envelopeID, replies.Recorded(ctx)); merr != nil {
		g.log.Warn("admission.done_marker_failed", "envelope", envelopeID, "err", merr)
	}
	return err
}

// sweepAfter is sweepIfIdle at the end of the turn of env, whose run
// key's removal was stored at sequence ended of the registry stream (0
// when it failed). A steering message is published, then marked queued in
// the registry, before its steerer checks for running turns (see
// Steering.Publish): once the mirror has applied ended, it holds every
// marker the removal could race with, so a session without one needs no
// read of the steering stream. Only turns whose admission nothing decides
// rely on this; the others read the stream, as their own messages may be
// what steered.
func (g *Gate) sweepAfter(ctx context.Context, session string, env *envelope.Envelope, ended uint64) {
	if ended > 0 && !g.o.Hooks.MayAdmit(env) && g.reg.live.await(ctx, ended) == nil && !g.reg.anyQueued(session) {
		return
	}
	g.sweepIfIdle(ctx, session)
}

// sweepIfIdle turns leftover steering messages into follow-ups when no
// turn of the session runs any more.
func (g *Gate) sweepIfIdle(ctx context.Context, session string) {
	if n, err := g.steer.Count(ctx, session); err == nil && n == 0 {
		return // the common case: nothing to sweep
	}
	k, _, err := g.reg.keys(ctx, session)
	if err != nil {
		g.log.Warn("admission.sweep_failed", "session", session, "err", err)
		return
	}
	if len(k.run) > 0 {
		return
	}
	if n, err := g.steer.Sweep(ctx, session); err != nil {
		g.log.Warn("admission.sweep_failed", "session", session, "err", err)
	} else if n > 0 {
		g.log.Info("admission.steering_to_follow_up", "session", session, "messages", n)
	}
}

func retry(doing string, err error) error {
	return fmt.Errorf("%w: %s: %w", worker.ErrRetry, doing, err)
}
