package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/worker"
)

// Quit (Bub's quit(session)) is a core-NATS broadcast on
// bub.control.quit.<session>: every gate subscribes, cancels its running
// turns of the session (except the calling turn) with worker.ErrQuit and
// clears its waiting follow-ups of the session. The caller then waits in
// the turn registry until those turns and follow-ups are gone.
//
// What quit stops is what arrived before it: the messages stored in the
// inbound stream before the call. Before the broadcast, a quit marker in
// the registry (subjects.Names.QuitKey) records the stream's next
// sequence and the calling turn: a message from before it that was not
// running anywhere (handed back by a stopping worker, or not yet
// delivered) is dropped when it is delivered again instead of running
// after the quit, and messages that arrive later run as usual.

// quitRequest is the body of a quit broadcast.
type quitRequest struct {
	// Session is the session whose turns stop.
	Session string `json:"session"`
	// Except is the envelope id of the calling turn, which keeps running.
	Except string `json:"except,omitempty"`
	// Before is the inbound stream's next sequence when quit was
	// called: only turns and follow-ups with a lower one stop (0: all
	// but Except).
	Before uint64 `json:"before,omitempty"`
}

// errNoSession is the error of a quit broadcast without a session.
var errNoSession = errors.New("quit broadcast without a session")

// decodeQuit decodes a quit broadcast.
func decodeQuit(data []byte) (quitRequest, error) {
	var q quitRequest
	if err := json.Unmarshal(data, &q); err != nil {
		return q, fmt.Errorf("decoding a quit broadcast: %w", err)
	}
	if q.Session == "" {
		return q, errNoSession
	}
	return q, nil
}

// quitCause is the cause with which ,quit stops a turn or follow-up:
// worker.ErrQuit, with the quit's inbound sequence (quitRequest.Before),
// which tells the stopped turn what of its steering to give back.
type quitCause struct{ before uint64 }

func (quitCause) Error() string        { return worker.ErrQuit.Error() }
func (quitCause) Is(target error) bool { return target == worker.ErrQuit }

// tracked is a turn or follow-up quit can stop.
type tracked struct {
	seq    uint64 // its inbound stream sequence
	cancel context.CancelCauseFunc
}

// local holds this worker's running turns and waiting follow-ups, by
// session and envelope id.
type local struct {
	mu       sync.Mutex
	sessions map[string]map[string]tracked
}

// track derives the context of a turn or follow-up of session, at inbound
// sequence seq, that quit can cancel; untrack must be called when it ends.
func (l *local) track(ctx context.Context, session, envelope string, seq uint64) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	untrack := l.add(session, envelope, tracked{seq, cancel})
	return ctx, func() {
		untrack()
		cancel(nil)
	}
}

// add lets quit cancel the turn or follow-up t of session until the
// returned untrack is called.
func (l *local) add(session, envelope string, t tracked) (untrack func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions == nil {
		l.sessions = map[string]map[string]tracked{}
	}
	if l.sessions[session] == nil {
		l.sessions[session] = map[string]tracked{}
	}
	l.sessions[session][envelope] = t
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.sessions[session], envelope)
		if len(l.sessions[session]) == 0 {
			delete(l.sessions, session)
		}
	}
}

// cancel cancels the tracked turns and follow-ups of session that q stops
// and returns how many.
func (l *local) cancel(q quitRequest) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id, t := range l.sessions[q.Session] {
		if id != q.Except && (q.Before == 0 || t.seq < q.Before) {
			t.cancel(quitCause{q.Before})
			n++
		}
	}
	return n
}

// onQuit handles a quit broadcast.
func (g *Gate) onQuit(msg *nats.Msg) {
	q, err := decodeQuit(msg.Data)
	if err != nil {
		g.log.Warn("admission.quit_invalid", "subject", msg.Subject, "err", err)
		return
	}
	if n := g.local.cancel(q); n > 0 {
		g.log.Info("admission.quit", "session", q.Session, "stopped", n)
	}
}

// Quit stops the session's turns on every worker except the turn of
// envelope caller, clears its waiting follow-ups, and returns once the
// turn registry shows them gone. It waits at most the registry TTL (the
// time a dead worker's keys take to expire). Turns and follow-ups of
// messages that arrive meanwhile run as usual.
func (g *Gate) Quit(ctx context.Context, session, caller string) error {
	ctx, cancel := context.WithTimeout(ctx, g.reg.ttl) // a flush needs a deadline too
	defer cancel()
	// Listed before the stream is read: every turn listed came before.
	earlier, _, err := g.reg.keys(ctx, session)
	if err != nil {
		return fmt.Errorf("quit: %w", err)
	}
	st, err := g.o.JS.Stream(ctx, g.o.Names.InboundStream())
	if err != nil {
		return fmt.Errorf("quit: reading the inbound stream: %w", err)
	}
	q := quitRequest{Session: session, Except: caller, Before: st.CachedInfo().State.LastSeq + 1}
	if err := g.reg.markQuit(ctx, session, q.Before, caller); err != nil {
		return fmt.Errorf("quit: marking: %w", err)
	}
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	nc := g.o.JS.Conn()
	recheck := time.NewTicker(g.reg.ttl / 3)
	defer recheck.Stop()
	mine := g.o.Names.TurnRunKey(session, caller)
	last := q.stops(earlier, earlier.run, mine) // the last listing that succeeded
	if err := nc.Publish(g.o.Names.ControlQuit(session), b); err != nil {
		return fmt.Errorf("quit: broadcasting: %w", err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("quit: broadcasting: %w", err)
	}
	for {
		k, version, err := g.reg.keys(ctx, session)
		if err == nil {
			last = q.stops(k, earlier.run, mine)
			if len(last.run) == 0 && len(last.wait) == 0 {
				return nil
			}
		}
		if err := g.reg.awaitChange(ctx, session, version, recheck.C, nil); err != nil {
			return fmt.Errorf("quit: %d turns and %d follow-ups of %s did not stop: %w", len(last.run), len(last.wait), session, err)
		}
		// Again at every look: a turn from before the quit that registered
		// after the last broadcast reached its worker stops too (later
		// turns never do).
		if err := nc.Publish(g.o.Names.ControlQuit(session), b); err != nil {
			return fmt.Errorf("quit: broadcasting: %w", err)
		}
	}
}

// stops keeps of k the keys quit waits for: the run keys among earlier
// but the caller's (mine), and the wait keys from before the quit.
func (q quitRequest) stops(k sessionKeys, earlier map[string]bool, mine string) sessionKeys {
	maps.DeleteFunc(k.run, func(key string, _ bool) bool { return !earlier[key] || key == mine })
	maps.DeleteFunc(k.wait, func(key string, _ bool) bool { return keySeq(key) >= q.Before })
	return k
}
