package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/worker"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// Steering is the steering queue of every session: the subjects
// bub.steer.<session> of stream BUB_STEER. A message stays in the stream
// until the turn that took it finished (or it was re-injected as a
// follow-up), so a worker crash never loses it.
type Steering struct {
	js     jetstream.JetStream
	names  subjects.Names
	reg    *Registry
	dlq    *dlq.Writer
	source string
	log    *slog.Logger

	mu     sync.Mutex
	stream jetstream.Stream
}

// NewSteering returns the steering queue over reg's connection.
func NewSteering(js jetstream.JetStream, names subjects.Names, reg *Registry, source string, log *slog.Logger) *Steering {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Steering{js: js, names: names, reg: reg, dlq: dlq.NewWriter(js, names, log), source: source, log: log}
}

func (s *Steering) steerStream(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		return s.stream, nil
	}
	st, err := s.js.Stream(ctx, s.names.SteerStream())
	if err != nil {
		return nil, fmt.Errorf("binding the steering stream: %w", err)
	}
	s.stream = st
	return st, nil
}

// Publish queues env, which arrived at inbound sequence arrived, for the
// running turn of session. The CloudEvent id is the envelope id, so a
// redelivered inbound message steers once.
func (s *Steering) Publish(ctx context.Context, session string, env *envelope.Envelope, arrived uint64) error {
	msg, err := s.message(s.names.Steer(session), session, env, arrived)
	if err != nil {
		return err
	}
	ack, err := s.js.PublishMsg(ctx, msg)
	if err != nil {
		return fmt.Errorf("publishing steering message %s: %w", env.ID, err)
	}
	// The marker is what the running turn's drain and the end-of-turn
	// check of a turn whose admission nothing decides look for, so a
	// message without one is redelivered (its publish is then a
	// duplicate, marked again).
	if err := s.reg.markQueued(ctx, session, ack.Sequence); err != nil {
		return fmt.Errorf("marking steering message %s queued: %w", env.ID, err)
	}
	return nil
}

// Count returns how many steering messages of session wait. The common
// answer, none, costs one direct get.
func (s *Steering) Count(ctx context.Context, session string) (int, error) {
	st, err := s.steerStream(ctx)
	if err != nil {
		return 0, err
	}
	subj := s.names.Steer(session)
	if _, err := st.GetLastMsgForSubject(ctx, subj); errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, err
	}
	return int(info.State.Subjects[subj]), nil
}

// ErrNotSteering is returned by [DecodeSteer] for a message that is not an
// inbound envelope.
var ErrNotSteering = errors.New("not a steering message")

// DecodeSteer decodes a steering message: a CloudEvent (binary or
// structured) of type dev.bub.envelope.inbound.v1 carrying a valid
// envelope.
func DecodeSteer(header nats.Header, data []byte) (*envelope.Envelope, error) {
	ev, err := events.Decode(header, data)
	if err != nil {
		return nil, err
	}
	if ev.Type() != events.TypeEnvelopeInbound {
		return nil, fmt.Errorf("%w: event type %q", ErrNotSteering, ev.Type())
	}
	var env envelope.Envelope
	if err := events.DecodeData(ev, &env); err != nil {
		return nil, err
	}
	if env.ID == "" {
		env.ID = ev.ID()
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	return &env, nil
}

// stored is one steering message read from the stream.
type stored struct {
	seq     uint64
	env     *envelope.Envelope
	arrived uint64 // its inbound sequence (Bub-Arrived), 0 when unknown
}

// each calls fn for every steering message of session at or after from
// that decodes; undecodable ones are dead-lettered and removed.
func (s *Steering) each(ctx context.Context, session string, from uint64, fn func(stored) error) (next uint64, err error) {
	st, err := s.steerStream(ctx)
	if err != nil {
		return from, err
	}
	subj := s.names.Steer(session)
	next = max(from, 1)
	for {
		raw, err := st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return next, nil
		}
		if err != nil {
			return next, err
		}
		next = raw.Sequence + 1
		env, derr := DecodeSteer(raw.Header, raw.Data)
		if derr != nil {
			if cerr := s.dlq.HoldStored(ctx, s.names.SteerStream(), raw, dlq.ReasonUndecodable, derr); cerr != nil {
				return next, cerr
			}
			_ = s.remove(ctx, session, raw.Sequence)
			continue
		}
		if err := fn(stored{seq: raw.Sequence, env: env, arrived: worker.Arrived(raw.Header)}); err != nil {
			return next, err
		}
	}
}

// remove deletes a steering message and its queued marker; one already
// gone is fine.
func (s *Steering) remove(ctx context.Context, session string, seq uint64) error {
	st, err := s.steerStream(ctx)
	if err != nil {
		return err
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !dlq.Gone(err) {
		return err
	}
	return s.reg.unmarkQueued(ctx, session, seq)
}

// Sweep re-injects every unclaimed steering message of session into the
// inbound stream as a forced follow-up (its envelope id and arrival kept,
// so the sender's reply waiter gets the answer and ,quit still knows it),
// then removes it. Call it when the session has no running turn. The
// sweep claims a message before re-injecting it (a claim only one claimer
// creates), so a turn that starts meanwhile and drains it does not run it
// too; publishing before removing, with a deterministic Nats-Msg-Id,
// makes repeated sweeps publish each message once within the duplicate
// window. A message a finished turn took, whose removal failed, is
// removed.
func (s *Steering) Sweep(ctx context.Context, session string) (int, error) {
	n := 0
	_, err := s.each(ctx, session, 1, func(m stored) error {
		key := s.names.SteerClaimKey(session, m.seq)
		e, claimed, err := s.reg.exists(ctx, key)
		if err != nil {
			return err
		}
		switch {
		case claimed && taken(e):
			return s.remove(ctx, session, m.seq)
		case claimed:
			if running, err := s.ownerRuns(ctx, session, e); err != nil || running {
				return err
			}
		default: // claimed until its TTL: the message is gone before then
			if _, err := s.reg.create(ctx, key, entry{Envelope: m.env.ID, Seq: m.seq}); errors.Is(err, jetstream.ErrKeyExists) {
				return nil // a turn took it meanwhile
			} else if err != nil {
				return err
			}
		}
		if err := s.reinject(ctx, session, m); err != nil {
			return err
		}
		n++
		return s.remove(ctx, session, m.seq)
	})
	return n, err
}

// ownerRuns reports whether the turn that claimed a steering message
// (claim e) still runs: its run key lives. A claim whose turn ended
// without taking the message (handed back, its redelivery done without
// draining) is abandoned, and the message is swept with the others
// instead of waiting, past the claim's TTL, for the session's next
// message.
func (s *Steering) ownerRuns(ctx context.Context, session string, e jetstream.KeyValueEntry) (bool, error) {
	v, err := decodeEntry(e.Value())
	if err != nil {
		return true, nil // unreadable: left to its TTL
	}
	_, ok, err := s.reg.exists(ctx, s.names.TurnRunKey(session, v.Owner))
	return ok, err
}

// message is the inbound-envelope event of env, which arrived at inbound
// sequence arrived (0: unknown), on subject.
func (s *Steering) message(subject, session string, env *envelope.Envelope, arrived uint64) (*nats.Msg, error) {
	ev, err := events.New(events.TypeEnvelopeInbound, events.Attrs{ID: env.ID, Source: s.source, SessionID: session}, env)
	if err != nil {
		return nil, err
	}
	msg, err := events.ToMsg(subject, ev)
	if err == nil && arrived > 0 {
		msg.Header.Set(subjects.HeaderArrived, strconv.FormatUint(arrived, 10))
	}
	return msg, err
}

func (s *Steering) reinject(ctx context.Context, session string, m stored) error {
	env := m.env
	msg, err := s.message(s.names.Inbound(env.ChannelOrDefault()), session, env, m.arrived)
	if err != nil {
		return err
	}
	msg.Header.Set(subjects.HeaderMsgID, env.ID+"/follow_up")
	msg.Header.Set(subjects.HeaderAdmission, string(followUp))
	if _, err := s.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("re-injecting steering message %s as a follow-up: %w", env.ID, err)
	}
	s.log.Info("admission.late_steer_follow_up", "session", session, "envelope", env.ID)
	return nil
}

// Inbox is one turn's view of its session's steering queue
// (hooks.Steering): Drain claims the waiting messages for the turn.
type Inbox struct {
	s       *Steering
	session string
	owner   string // the turn's envelope id

	mu     sync.Mutex
	next   uint64
	claims []claim
}

type claim struct {
	seq     uint64
	arrived uint64 // the message's inbound sequence, 0 when unknown
	lease   *lease
}

// Inbox returns the steering inbox of the turn of envelope owner.
func (s *Steering) Inbox(session, owner string) *Inbox {
	return &Inbox{s: s, session: session, owner: owner, next: 1}
}

// Drain claims every steering message of the session not claimed by
// another live turn and returns them in arrival order (the worker builds
// their prompts with build_prompt). A claim
// by the same envelope (an earlier delivery of this turn that died) is
// taken over. Failures to read or claim are logged, never returned. While
// the registry mirror shows no queued marker for the session it reads
// nothing (the common case costs no round trip); a message whose marker
// it has not seen yet is drained next time or swept after the turn.
func (in *Inbox) Drain(ctx context.Context) ([]*envelope.Envelope, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.s.reg.anyQueued(in.session) {
		return nil, nil
	}
	var out []*envelope.Envelope
	next, err := in.s.each(ctx, in.session, in.next, func(m stored) error {
		key := in.s.names.SteerClaimKey(in.session, m.seq)
		e, taken, err := in.s.reg.exists(ctx, key)
		if err != nil {
			return err
		}
		if taken && !ownedBy(e, in.owner) {
			return nil
		}
		v := entry{Envelope: m.env.ID, Owner: in.owner, Seq: m.seq}
		var l *lease
		if taken { // an earlier delivery of this turn's: taken over
			l, err = in.s.reg.hold(ctx, key, v)
		} else if l, err = in.s.reg.claim(ctx, key, v); errors.Is(err, jetstream.ErrKeyExists) {
			return nil // another turn, or a sweep, claimed it meanwhile
		}
		if err != nil {
			return err
		}
		in.claims = append(in.claims, claim{seq: m.seq, arrived: m.arrived, lease: l})
		out = append(out, m.env)
		return nil
	})
	in.next = next
	if err != nil {
		// Steering never fails the run: what could not be read or claimed
		// stays in the stream for the next drain, the next turn or the
		// sweep that makes it a follow-up.
		in.s.log.Warn("admission.steering_drain_failed", "session", in.session, "err", err)
	}
	return out, nil
}

func ownedBy(e jetstream.KeyValueEntry, owner string) bool {
	v, err := decodeEntry(e.Value())
	return err == nil && v.Owner == owner
}

// taken reports whether claim e marks a message a finished turn took
// (Registry.markTaken).
func taken(e jetstream.KeyValueEntry) bool {
	v, err := decodeEntry(e.Value())
	return err == nil && v.Taken
}

// Claimed returns how many steering messages the turn took.
func (in *Inbox) Claimed() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.claims)
}

// Commit removes the claimed messages: the turn that took them finished.
// A turn stopped by ,quit passes the quit's inbound sequence as before:
// the messages that arrived after the quit are given back instead (their
// claims removed), for the end-of-turn sweep to run them as follow-ups. A
// message whose removal fails stays claimed as taken (for the done
// markers' TTL), so that no sweep runs it again and the next sweep removes
// it.
func (in *Inbox) Commit(ctx context.Context, before uint64) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	var errs []error
	for _, c := range in.claims {
		if before > 0 && c.arrived >= before {
			c.lease.end(ctx)
			continue
		}
		err := jsretry.Read(ctx, func(ctx context.Context) error { return in.s.remove(ctx, in.session, c.seq) })
		if err == nil {
			c.lease.end(ctx)
			continue
		}
		c.lease.stop() // no heartbeat may overwrite the mark
		if merr := in.s.reg.markTaken(ctx, c.lease.key, c.seq); merr != nil {
			err = errors.Join(err, merr)
		}
		errs = append(errs, err)
	}
	in.claims = nil
	return errors.Join(errs...)
}

// Release gives the claimed messages back (the turn is handed back): the
// claims stay until their TTL so the redelivered turn takes them over.
func (in *Inbox) Release() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, c := range in.claims {
		c.lease.stop()
	}
	in.claims = nil
}
