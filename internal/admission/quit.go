package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/worker"
)

// Quit (Bub's quit(session)) is a core-NATS broadcast on
// bub.control.quit.<session>: every gate subscribes, cancels its running
// turns of the session with worker.ErrQuit (except the calling turn) and
// clears its waiting follow-ups of the session. The caller then waits in
// the turn registry until those turns and follow-ups are gone.

// quitRequest is the body of a quit broadcast.
type quitRequest struct {
	// Session is the session whose turns stop.
	Session string `json:"session"`
	// Except is the envelope id of the calling turn, which keeps running.
	Except string `json:"except,omitempty"`
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

// local holds the cancel functions of this worker's running turns and
// waiting follow-ups, by session and envelope id.
type local struct {
	mu       sync.Mutex
	sessions map[string]map[string]context.CancelCauseFunc
}

// track derives the context of a turn or follow-up of session that quit
// can cancel; untrack must be called when it ends.
func (l *local) track(ctx context.Context, session, envelope string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	untrack := l.add(session, envelope, cancel)
	return ctx, func() {
		untrack()
		cancel(nil)
	}
}

// add lets quit cancel the turn or follow-up of session with cancel
// until the returned untrack is called.
func (l *local) add(session, envelope string, cancel context.CancelCauseFunc) (untrack func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions == nil {
		l.sessions = map[string]map[string]context.CancelCauseFunc{}
	}
	if l.sessions[session] == nil {
		l.sessions[session] = map[string]context.CancelCauseFunc{}
	}
	l.sessions[session][envelope] = cancel
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.sessions[session], envelope)
		if len(l.sessions[session]) == 0 {
			delete(l.sessions, session)
		}
	}
}

// cancel cancels every tracked turn and follow-up of session but except's
// and returns how many.
func (l *local) cancel(session, except string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id, cancel := range l.sessions[session] {
		if id != except {
			cancel(worker.ErrQuit)
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
	if n := g.local.cancel(q.Session, q.Except); n > 0 {
		g.log.Info("admission.quit", "session", q.Session, "stopped", n)
	}
}

// Quit stops the session's turns on every worker except the turn of
// envelope caller, clears its waiting follow-ups, and returns once the
// turn registry shows them gone. It waits at most the registry TTL (the
// time a dead worker's keys take to expire).
func (g *Gate) Quit(ctx context.Context, session, caller string) error {
	b, err := json.Marshal(quitRequest{Session: session, Except: caller})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, g.reg.ttl) // a flush needs a deadline too
	defer cancel()
	nc := g.o.JS.Conn()
	if err := nc.Publish(g.o.Names.ControlQuit(session), b); err != nil {
		return fmt.Errorf("quit: broadcasting: %w", err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("quit: broadcasting: %w", err)
	}
	mine := g.o.Names.TurnRunKey(session, caller)
	recheck := time.NewTicker(g.reg.ttl / 3)
	defer recheck.Stop()
	var last sessionKeys // the last listing that succeeded
	for {
		k, version, err := g.reg.keys(ctx, session)
		if err == nil {
			delete(k.run, mine)
			if len(k.run) == 0 && len(k.wait) == 0 {
				return nil
			}
			last = k
		}
		if err := g.reg.awaitChange(ctx, session, version, recheck.C, nil); err != nil {
			return fmt.Errorf("quit: %d turns and %d follow-ups of %s did not stop: %w", len(last.run), len(last.wait), session, err)
		}
	}
}
