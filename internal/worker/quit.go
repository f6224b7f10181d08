package worker

import (
	"context"
	"errors"
)

// ErrQuit is the cause with which ,quit cancels a turn of its session
// (Bub's quit(session): the session's other tasks are cancelled). A turn
// cancelled with it ends cleanly: its run is recorded as cancelled, it
// sends no reply, and its inbound message is acknowledged.
var ErrQuit = errors.New("stopped by quit in its session")

// Quitter stops the turns of a session on every worker except the turn of
// envelope caller, clears the session's waiting follow-ups, and returns
// once they ended (the admission gate implements it).
type Quitter interface {
	Quit(ctx context.Context, session, caller string) error
}

// SetQuitter gives the quit tool what stops the session's other turns.
// Call it once, before the worker runs; without it quit only terminates
// the session's background shells.
func (rt *Runtime) SetQuitter(q Quitter) { rt.quitter = q }

// quit is the quit tool's Options.Quit: it stops the session's other
// turns, the calling turn excepted.
func (rt *Runtime) quit(ctx context.Context, session string) error {
	if rt.quitter == nil {
		return nil
	}
	caller := ""
	if t := turnFrom(ctx); t != nil {
		caller = t.envelope
	}
	return rt.quitter.Quit(ctx, session, caller)
}

// quitted reports whether ctx, a turn's context, was cancelled by quit.
func quitted(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrQuit) }
