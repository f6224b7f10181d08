package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/replies"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// Registry is the cluster-wide turn registry: the turns KV bucket, with a
// key per running turn, per waiting follow-up, per claimed steering
// message and per finished envelope. Every key but the done markers lives
// only while its owner heartbeats it. A worker mirrors the session keys
// from one watch (see live) and heartbeats all its keys from one loop.
type Registry struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	names   subjects.Names
	bucket  string
	ttl     time.Duration
	doneTTL time.Duration
	log     *slog.Logger
	live    *live

	mu     sync.Mutex
	leases map[*lease]struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// RegistryOptions configure [NewRegistry].
type RegistryOptions struct {
	// TTL is how long a key lives without a heartbeat (30s); heartbeats
	// come every TTL/3.
	TTL time.Duration
	// DoneTTL is how long a done marker is kept (1h); it must outlive
	// every redelivery of an acknowledged-but-lost envelope (ack wait ×
	// max deliver).
	DoneTTL time.Duration
	Log     *slog.Logger
}

// NewRegistry binds the turns bucket (created by natsx.EnsureTopology),
// starts mirroring it and heartbeating; Close stops both.
func NewRegistry(ctx context.Context, js jetstream.JetStream, names subjects.Names, o RegistryOptions) (*Registry, error) {
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	o.TTL = max(o.TTL, time.Second) // the server's minimum message TTL
	if o.DoneTTL <= 0 {
		o.DoneTTL = time.Hour
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	kv, err := js.KeyValue(ctx, names.TurnsBucket())
	if err != nil {
		return nil, fmt.Errorf("binding the turn registry: %w", err)
	}
	r := &Registry{js: js, kv: kv, names: names, bucket: names.TurnsBucket(), ttl: o.TTL, doneTTL: o.DoneTTL, log: o.Log,
		leases: map[*lease]struct{}{}, stop: make(chan struct{})}
	if r.live, err = watchLive(context.WithoutCancel(ctx), r); err != nil {
		return nil, err
	}
	r.wg.Go(r.heartbeat)
	return r, nil
}

// Close stops the mirror and the heartbeats; keys still held keep their
// TTL (a hand-back).
func (r *Registry) Close() {
	r.live.stop()
	close(r.stop)
	r.wg.Wait()
}

// heartbeat refreshes every held key every TTL/3.
func (r *Registry) heartbeat() {
	t := time.NewTicker(r.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		held := make([]*lease, 0, len(r.leases))
		for l := range r.leases {
			held = append(held, l)
		}
		r.mu.Unlock()
		r.beatAll(held)
	}
}

// beatAll refreshes every lease of held at once (asynchronous publishes,
// so thousands of keys take one round trip, not one each) and logs the
// ones that failed.
func (r *Registry) beatAll(held []*lease) {
	type pending struct {
		l *lease
		f jetstream.PubAckFuture
	}
	var sent []pending
	for _, l := range held {
		f, err := l.beatAsync()
		switch {
		case err != nil:
			r.log.Warn("admission.heartbeat_failed", "key", l.key, "err", err)
		case f != nil:
			sent = append(sent, pending{l, f})
		}
	}
	timeout := time.NewTimer(r.ttl / 3)
	defer timeout.Stop()
	for _, p := range sent {
		select {
		case <-p.f.Ok():
		case err := <-p.f.Err():
			r.log.Warn("admission.heartbeat_failed", "key", p.l.key, "err", err)
		case <-timeout.C:
			r.log.Warn("admission.heartbeat_unanswered", "keys", len(sent))
			return
		}
	}
}

// entry is the value of a run, wait or steering-claim key.
type entry struct {
	Envelope string    `json:"envelope"`
	Seq      uint64    `json:"seq,omitempty"`
	Owner    string    `json:"owner"`
	Since    time.Time `json:"since"`
	// Taken marks the claim of a steering message a finished turn took
	// but could not remove (see Inbox.Commit).
	Taken bool `json:"taken,omitempty"`
}

// sessionKeys are the live run and wait keys of a session, its queued
// steering markers and its quit markers.
type sessionKeys struct {
	run    map[string]bool
	wait   map[string]bool
	queued map[string]bool
	quit   map[string]bool
}

func newSessionKeys() sessionKeys {
	return sessionKeys{run: map[string]bool{}, wait: map[string]bool{}, queued: map[string]bool{}, quit: map[string]bool{}}
}

func (k sessionKeys) clone() sessionKeys {
	return sessionKeys{run: maps.Clone(k.run), wait: maps.Clone(k.wait), queued: maps.Clone(k.queued), quit: maps.Clone(k.quit)}
}

func (k sessionKeys) empty() bool { return len(k.run)+len(k.wait)+len(k.queued)+len(k.quit) == 0 }

func (k sessionKeys) apply(key string, present bool) {
	switch {
	case strings.Contains(key, ".run."):
		set(k.run, key, present)
	case strings.Contains(key, ".wait."):
		set(k.wait, key, present)
	case strings.Contains(key, ".queued."):
		set(k.queued, key, present)
	case strings.Contains(key, ".quit."):
		set(k.quit, key, present)
	}
}

// quitAt returns the inbound sequence of the session's latest ,quit (0
// when none is marked): turns and follow-ups before it never run.
func (k sessionKeys) quitAt() uint64 {
	var at uint64
	for key := range k.quit {
		at = max(at, keySeq(key))
	}
	return at
}

// keySeq is the sequence a wait or quit key ends with (0 when it ends
// with none).
func keySeq(key string) uint64 {
	seq, _ := strconv.ParseUint(key[strings.LastIndexByte(key, '.')+1:], 10, 64)
	return seq
}

func set(m map[string]bool, key string, present bool) {
	if present {
		m[key] = true
	} else {
		delete(m, key)
	}
}

// unversioned is the version of a listing the mirror did not make.
const unversioned = math.MaxUint64

// keys lists the live session keys of session, exact as of the call, and
// the session's change version in the mirror (unversioned when the mirror
// could not answer and the keys were listed from a watch of their own).
func (r *Registry) keys(ctx context.Context, session string) (sessionKeys, uint64, error) {
	k, v, err := r.live.keys(ctx, session)
	if err == nil {
		return k, v, nil
	}
	if ctx.Err() != nil {
		return k, unversioned, err
	}
	r.log.Warn("admission.mirror_unavailable", "session", session, "err", err)
	k, err = r.listKeys(ctx, session)
	return k, unversioned, err
}

// listKeys lists the live session keys of session (as the mirror holds
// them) from a watch of their own (a consumer): the fallback when the
// mirror cannot answer.
func (r *Registry) listKeys(ctx context.Context, session string) (sessionKeys, error) {
	out := newSessionKeys()
	w, err := r.kv.WatchFiltered(ctx, []string{r.names.TurnKeysOfSession(session)}, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return out, fmt.Errorf("listing turns of %s: %w", session, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out, nil
			}
			out.apply(e.Key(), true)
		case <-ctx.Done():
			return out, fmt.Errorf("listing turns of %s: %w", session, ctx.Err())
		}
	}
}

// lease is a registry key kept alive by the registry's heartbeats until
// it is ended.
type lease struct {
	r   *Registry
	key string
	val []byte

	mu      sync.Mutex // held while a heartbeat is sent, so none follows stop
	stopped bool
}

// hold writes key with the registry TTL and heartbeats it every TTL/3
// until the lease ends.
func (r *Registry) hold(ctx context.Context, key string, v any) (*lease, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	l := &lease{r: r, key: key, val: b}
	// A rewrite of the same value is harmless, so the first write rides
	// out the bucket's leader election instead of handing the turn back.
	if err := jsretry.Read(ctx, l.beat); err != nil {
		return nil, fmt.Errorf("registering %s: %w", key, err)
	}
	return r.keep(l), nil
}

// keep heartbeats l from now on.
func (r *Registry) keep(l *lease) *lease {
	r.mu.Lock()
	r.leases[l] = struct{}{}
	r.mu.Unlock()
	return l
}

// create writes key with the registry TTL unless it exists (one creator
// wins: jetstream.ErrKeyExists for the others) and returns the value
// written.
func (r *Registry) create(ctx context.Context, key string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	_, err = r.kv.Create(ctx, key, b, jetstream.KeyTTL(r.ttl))
	return b, err
}

// claim creates key and heartbeats it as hold does.
func (r *Registry) claim(ctx context.Context, key string, v any) (*lease, error) {
	b, err := r.create(ctx, key, v)
	if err != nil {
		return nil, err
	}
	return r.keep(&lease{r: r, key: key, val: b}), nil
}

// markTaken rewrites the steering claim key of the message at steer
// sequence seq as taken, for the done markers' TTL (see Inbox.Commit).
func (r *Registry) markTaken(ctx context.Context, key string, seq uint64) error {
	b, err := json.Marshal(entry{Seq: seq, Taken: true, Since: time.Now().UTC()})
	if err != nil {
		return err
	}
	return r.putMarker(ctx, key, b)
}

// beat (re)writes the key with a fresh TTL and waits for the write. KV
// Put cannot set a TTL, so it publishes to the key's subject with a
// message TTL.
func (l *lease) beat(ctx context.Context) error {
	_, err := l.r.js.Publish(ctx, l.r.names.KVPut(l.r.js.Options().Domain, l.r.bucket, l.key), l.val, jetstream.WithMsgTTL(l.r.ttl))
	return err
}

// beatAsync sends a heartbeat unless the lease stopped (then it returns
// nil, nil). It holds the lease while sending, so a heartbeat never
// follows stop, and the removal that follows stop on the same connection
// reaches the stream after it.
func (l *lease) beatAsync() (jetstream.PubAckFuture, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil, nil
	}
	return l.r.js.PublishAsync(l.r.names.KVPut(l.r.js.Options().Domain, l.r.bucket, l.key), l.val, jetstream.WithMsgTTL(l.r.ttl))
}

// stop ends the heartbeats and keeps the key until its TTL runs out (a
// hand-back: the redelivered message takes the key over).
func (l *lease) stop() {
	l.r.mu.Lock()
	delete(l.r.leases, l)
	l.r.mu.Unlock()
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// end stops the heartbeats and removes the key, and returns the stream
// sequence of the removal (0 when it failed).
func (l *lease) end(ctx context.Context) uint64 {
	l.stop()
	seq, err := l.r.purge(ctx, l.key)
	if err != nil {
		l.r.log.Warn("admission.unregister_failed", "key", l.key, "err", err)
	}
	return seq
}

// purge removes key as KeyValue.Purge with PurgeTTL(ttl) does (a purge
// marker that rolls up the key's subject and expires after the TTL) and
// returns the marker's stream sequence.
func (r *Registry) purge(ctx context.Context, key string) (uint64, error) {
	m := nats.NewMsg(r.names.KVKeySubject(r.bucket, key))
	m.Header.Set(kvOperation, kvPurge)
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := r.js.PublishMsg(ctx, m, jetstream.WithMsgTTL(r.ttl))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// The KV header of a purge marker (as nats.go writes it).
const (
	kvOperation = "KV-Operation"
	kvPurge     = "PURGE"
)

// exists reports whether key is live.
func (r *Registry) exists(ctx context.Context, key string) (jetstream.KeyValueEntry, bool, error) {
	e, err := r.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return e, true, nil
}

// Done reports whether the turn of envelope already finished and was
// acknowledged.
func (r *Registry) Done(ctx context.Context, envelope string) (bool, error) {
	_, ok, err := r.exists(ctx, r.names.DoneKey(envelope))
	return ok, err
}

// MarkDone records that the turn of envelope finished (before its inbound
// message is acknowledged) and where the replies it sent are stored.
func (r *Registry) MarkDone(ctx context.Context, envelope string, sent []replies.Ref) error {
	value, err := replies.Done{At: time.Now().UTC(), Replies: sent}.Encode()
	if err != nil {
		return err
	}
	return r.putMarker(ctx, r.names.DoneKey(envelope), value)
}

// markDecided records that envelope was steered or dropped (before the
// decision's effects); it lives as long as a done marker.
func (r *Registry) markDecided(ctx context.Context, envelope string, action hooks.AdmitAction) error {
	return r.putMarker(ctx, r.names.DecidedKey(envelope), []byte(action))
}

// putMarker writes key, a marker kept for the done markers' TTL.
// Idempotent: retried through the bucket's leader election.
func (r *Registry) putMarker(ctx context.Context, key string, value []byte) error {
	return jsretry.Read(ctx, func(ctx context.Context) error {
		_, err := r.js.Publish(ctx, r.names.KVPut(r.js.Options().Domain, r.bucket, key), value, jetstream.WithMsgTTL(r.doneTTL))
		return err
	})
}

// decided returns what envelope was decided to be by [Registry.markDecided],
// "" when nothing.
func (r *Registry) decided(ctx context.Context, envelope string) (hooks.AdmitAction, error) {
	e, ok, err := r.exists(ctx, r.names.DecidedKey(envelope))
	if !ok {
		return "", err
	}
	return hooks.AdmitAction(e.Value()), nil
}

// markQuit records that the ,quit of the turn of envelope caller stopped
// session's messages before inbound sequence before (see
// subjects.Names.QuitKey).
func (r *Registry) markQuit(ctx context.Context, session string, before uint64, caller string) error {
	return r.putMarker(ctx, r.names.QuitKey(session, before), []byte(caller))
}

// quitStops reports whether the quit marked at before (0: none) stops the
// message of envelope at inbound sequence seq: it came before the quit
// and is not the turn that quit.
func (r *Registry) quitStops(ctx context.Context, session, envelope string, seq, before uint64) (bool, error) {
	if seq >= before {
		return false, nil
	}
	e, ok, err := r.exists(ctx, r.names.QuitKey(session, before))
	if err != nil || !ok {
		return false, err
	}
	return string(e.Value()) != envelope, nil
}

// queuedTTL bounds how long a queued-steering marker outlives a worker
// that died before removing it (the end-of-turn sweep reads the stream
// itself, so a marker lost early never loses a message).
const queuedTTL = time.Hour

// markQueued records that the steering message at seq of session waits.
func (r *Registry) markQueued(ctx context.Context, session string, seq uint64) error {
	_, err := r.js.Publish(ctx, r.names.KVPut(r.js.Options().Domain, r.bucket, r.names.SteerQueuedKey(session, seq)), nil, jetstream.WithMsgTTL(queuedTTL))
	return err
}

// unmarkQueued removes the marker of a steering message that is gone.
func (r *Registry) unmarkQueued(ctx context.Context, session string, seq uint64) error {
	return r.kv.Purge(ctx, r.names.SteerQueuedKey(session, seq), jetstream.PurgeTTL(r.ttl))
}

// anyQueued reports whether the mirror holds a queued steering marker of
// session (without a barrier: a marker written a moment ago may be seen
// at the next call).
func (r *Registry) anyQueued(session string) bool { return r.live.anyQueued(session) }

// errStopping is returned when the worker drains while a follow-up waits.
var errStopping = errors.New("worker stopping")

// awaitTurn blocks until the follow-up with wait key mine may start: no
// turn of the session runs and no follow-up with a lower sequence waits.
// It rechecks whenever the mirror sees the session change, and every TTL/3
// in case a change went unseen.
func (r *Registry) awaitTurn(ctx context.Context, session, mine string, stopping <-chan struct{}) error {
	recheck := time.NewTicker(r.ttl / 3)
	defer recheck.Stop()
	for {
		k, version, err := r.keys(ctx, session)
		switch {
		case err != nil && ctx.Err() != nil:
			return err
		case err != nil:
			r.log.Warn("admission.watch_failed", "session", session, "err", err)
		case free(k, mine):
			return nil
		}
		if err := r.awaitChange(ctx, session, version, recheck.C, stopping); err != nil {
			return err
		}
	}
}

// awaitChange blocks until the mirror's version of session differs from
// version or recheck ticks; it fails once ctx is done. A listing the
// mirror did not make (unversioned) waits for the mirror's next change, or
// for recheck once its watch ended (no change comes then: the caller
// would list the keys again and again).
func (r *Registry) awaitChange(ctx context.Context, session string, version uint64, recheck <-chan time.Time, stopping <-chan struct{}) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		changed, now := r.live.changed(session)
		if version != unversioned && now != version {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stopping:
			return errStopping
		case <-recheck:
			return nil
		case <-changed:
			if version == unversioned {
				return nil
			}
		}
	}
}

// free reports whether the follow-up with wait key mine may start.
func free(k sessionKeys, mine string) bool {
	if len(k.run) > 0 {
		return false
	}
	for key := range k.wait {
		if key < mine {
			return false
		}
	}
	return true
}

func decodeEntry(b []byte) (entry, error) {
	var e entry
	err := json.Unmarshal(b, &e)
	return e, err
}
