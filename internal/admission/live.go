package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// live mirrors the session keys of the turn registry (run, wait,
// queued-steering and steering-claim keys; not the done markers) from one
// KV watch per worker, so a turn snapshot costs one direct get instead of
// a consumer per turn.
//
// The mirror is made exact by a barrier: [live.keys] asks the stream for
// the sequence of the session's newest key message and waits until the
// watch has applied it. The watch delivers in stream order, so from then on
// the mirror holds every write of the session up to that moment.
type live struct {
	nc        *nats.Conn
	directGet string // the direct-get subject of the bucket's stream
	pattern   func(session string) string
	w         jetstream.KeyWatcher

	mu       sync.Mutex
	seq      uint64                 // the newest stream sequence applied
	sessions map[string]sessionKeys // by session token; only non-empty ones
	versions map[string]uint64      // by session token: changes at its last change
	changes  uint64                 // every change counts one
	advanced chan struct{}          // closed (and replaced) whenever seq grows
	ended    error                  // why the watch ended, once it has
}

// errMirrorBehind is returned when the mirror did not catch up in time (a
// stalled or reconnecting watch); callers fall back to listing the keys.
var errMirrorBehind = errors.New("turn registry mirror is behind")

// mirrorWait bounds how long a snapshot waits for the stream's answer and
// then for the mirror.
const mirrorWait = 2 * time.Second

// watchLive starts the mirror; it runs until stop.
func watchLive(ctx context.Context, r *Registry) (*live, error) {
	w, err := r.kv.WatchFiltered(ctx, []string{r.names.TurnSessionKeys()}, jetstream.MetaOnly())
	if err != nil {
		return nil, fmt.Errorf("watching the turn registry: %w", err)
	}
	l := &live{
		nc:        r.js.Conn(),
		directGet: r.names.DirectGet(r.js.Options().Domain, r.names.KVStream(r.bucket)),
		pattern: func(session string) string {
			return r.names.KVKeySubject(r.bucket, r.names.TurnKeysOfSession(session))
		},
		w:        w,
		sessions: map[string]sessionKeys{},
		versions: map[string]uint64{},
		advanced: make(chan struct{}),
	}
	go l.run()
	return l, nil
}

func (l *live) run() {
	for e := range l.w.Updates() {
		if e != nil {
			l.apply(e.Key(), e.Revision(), e.Operation() == jetstream.KeyValuePut)
		}
	}
	l.mu.Lock()
	l.ended = errors.New("turn registry watch ended")
	close(l.advanced)
	l.mu.Unlock()
}

func (l *live) apply(key string, seq uint64, present bool) {
	session, _, ok := strings.Cut(key, ".")
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.sessions[session]
	if !ok {
		k = newSessionKeys()
	}
	k.apply(key, present)
	l.changes++
	if k.empty() {
		delete(l.sessions, session)
		delete(l.versions, session)
	} else {
		l.sessions[session] = k
		l.versions[session] = l.changes
	}
	if seq > l.seq {
		l.seq = seq
		close(l.advanced)
		l.advanced = make(chan struct{})
	}
}

// stop ends the watch.
func (l *live) stop() { _ = l.w.Stop() }

// keys returns the live run and wait keys of session, exact as of the
// call, and the session's change version.
func (l *live) keys(ctx context.Context, session string) (sessionKeys, uint64, error) {
	need, err := l.newest(ctx, session)
	if err != nil {
		return sessionKeys{}, 0, err
	}
	if err := l.await(ctx, need); err != nil {
		return sessionKeys{}, 0, err
	}
	tok := subjects.Token(session)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions[tok].clone(), l.versions[tok], nil
}

// await waits until the mirror has applied stream sequence seq, at most
// mirrorWait.
func (l *live) await(ctx context.Context, seq uint64) error {
	timer := time.NewTimer(mirrorWait)
	defer timer.Stop()
	for {
		l.mu.Lock()
		if l.ended != nil {
			l.mu.Unlock()
			return l.ended
		}
		if l.seq >= seq {
			l.mu.Unlock()
			return nil
		}
		advanced := l.advanced
		l.mu.Unlock()
		select {
		case <-advanced:
		case <-timer.C:
			return errMirrorBehind
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// anyQueued reports whether the mirror holds a queued steering marker of
// session, as far as it has seen.
func (l *live) anyQueued(session string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions[subjects.Token(session)].queued) > 0
}

// quitAt returns the inbound sequence of session's latest ,quit as far as
// the mirror has seen (see sessionKeys.quitAt).
func (l *live) quitAt(session string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions[subjects.Token(session)].quitAt()
}

// changed returns a channel closed on the next change of the mirror (nil
// once the watch ended), and the session's version now.
func (l *live) changed(session string) (<-chan struct{}, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return nil, l.versions[subjects.Token(session)]
	}
	return l.advanced, l.versions[subjects.Token(session)]
}

// newest asks the stream (a direct get) for the sequence of the newest
// key message of session; 0 when it has none.
func (l *live) newest(ctx context.Context, session string) (uint64, error) {
	body, _ := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{l.pattern(session)})
	ctx, cancel := context.WithTimeout(ctx, mirrorWait)
	defer cancel()
	msg, err := l.nc.RequestWithContext(ctx, l.directGet, body)
	if err != nil {
		return 0, fmt.Errorf("reading the turn registry of %s: %w", session, err)
	}
	switch status := msg.Header.Get(subjects.HeaderStatus); status {
	case "":
	case "404":
		return 0, nil
	default:
		return 0, fmt.Errorf("reading the turn registry of %s: status %s %s", session, status, msg.Header.Get(subjects.HeaderDescription))
	}
	seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading the turn registry of %s: bad sequence: %w", session, err)
	}
	return seq, nil
}
