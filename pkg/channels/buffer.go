package channels

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// BufferConfig configures the debounce of [Buffer]. The
// zero value means the documented defaults.
type BufferConfig struct {
	// Debounce is how long a session's batch waits after its latest
	// active message (BUB_DEBOUNCE_SECONDS, 1s).
	Debounce time.Duration
	// MaxWait is how long an inactive message inside an active
	// conversation waits for its batch to be flushed
	// (BUB_MAX_WAIT_SECONDS, 10s).
	MaxWait time.Duration
	// ActiveWindow is how long a conversation stays active after its
	// latest active message; inactive messages outside it are ignored
	// (BUB_ACTIVE_TIME_WINDOW, 60s).
	ActiveWindow time.Duration
}

func (c BufferConfig) withDefaults() BufferConfig {
	if c.Debounce == 0 {
		c.Debounce = time.Second
	}
	if c.MaxWait == 0 {
		c.MaxWait = 10 * time.Second
	}
	if c.ActiveWindow == 0 {
		c.ActiveWindow = time.Minute
	}
	return c
}

// LogValue implements slog.LogValuer with the effective settings.
func (c BufferConfig) LogValue() slog.Value {
	c = c.withDefaults()
	return slog.GroupValue(
		slog.Duration("debounce", c.Debounce),
		slog.Duration("max_wait", c.MaxWait),
		slog.Duration("active_time_window", c.ActiveWindow),
	)
}

// Validate reports impossible settings.
func (c BufferConfig) Validate() error {
	var errs []error
	if c.Debounce < 0 {
		errs = append(errs, errors.New("debounce must not be negative"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("max wait must not be negative"))
	}
	if c.ActiveWindow < 0 {
		errs = append(errs, errors.New("active time window must not be negative"))
	}
	return errors.Join(errs...)
}

// ErrClosed is returned for a message handed to a closed [Buffer] or a
// stopped [Manager].
var ErrClosed = errors.New("channels: closed")

// Buffer is Bub's buffered message handler: it batches
// the messages of each raw session id until the conversation pauses, then
// forwards the batch merged by [envelope.FromBatch].
//
//   - A message whose content starts with "," (a comma command) is
//     forwarded at once.
//   - An inactive message (IsActive false) when the session has no active
//     conversation (never active, or its latest active message is older
//     than ActiveWindow) is ignored.
//   - Otherwise the message joins the batch. An active message makes the
//     conversation active now and (re)sets the flush timer to Debounce;
//     an inactive one inside the window sets it to MaxWait when no flush
//     is scheduled yet.
//
// Flushes run on timer goroutines that [Buffer.Close] waits for; a flush
// runs with the context of the message that scheduled it, without its
// cancellation. A failed forward of a flushed batch is logged.
type Buffer struct {
	cfg  BufferConfig
	next hooks.MessageHandler
	log  *slog.Logger
	wg   sync.WaitGroup // flushes in flight

	mu       sync.Mutex
	closed   bool
	sessions map[string]*session
}

// session is the buffered state of one raw session id.
type session struct {
	batch      []*envelope.Envelope
	lastActive time.Time // zero: no active conversation
	// flush identifies the scheduled flush (nil: none); a timer whose
	// token is no longer current does nothing.
	flush *flushToken
	timer *time.Timer
}

type flushToken struct{ ctx context.Context }

// NewBuffer returns a buffer forwarding batches to next.
func NewBuffer(cfg BufferConfig, next hooks.MessageHandler, log *slog.Logger) (*Buffer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Buffer{cfg: cfg.withDefaults(), next: next, log: log, sessions: map[string]*session{}}, nil
}

// SessionKey is the raw session id a message is buffered under: its
// session id, else Bub's default "<channel>:<chat_id>".
func SessionKey(msg *envelope.Envelope) string {
	if msg.SessionID != "" {
		return msg.SessionID
	}
	return msg.DefaultSessionID()
}

// Handle takes one message. Only a comma command is forwarded before
// Handle returns (and its error returned); buffered messages are forwarded
// later.
func (b *Buffer) Handle(ctx context.Context, msg *envelope.Envelope) error {
	if strings.HasPrefix(msg.Content, ",") {
		if b.isClosed() {
			return ErrClosed
		}
		return b.next(ctx, msg)
	}
	key := SessionKey(msg)
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	s := b.sessions[key]
	if s == nil {
		s = &session{}
		b.sessions[key] = s
	}
	if !msg.IsActive && (s.lastActive.IsZero() || now.Sub(s.lastActive) > b.cfg.ActiveWindow) {
		s.lastActive = time.Time{}
		if len(s.batch) == 0 && s.flush == nil {
			delete(b.sessions, key)
		}
		b.log.DebugContext(ctx, "channels.message_ignored", "session", key, "id", msg.ID, "reason", "inactive message outside an active conversation")
		return nil
	}
	s.batch = append(s.batch, msg)
	switch {
	case msg.IsActive:
		s.lastActive = now
		b.schedule(ctx, key, s, b.cfg.Debounce)
	case s.flush == nil:
		b.schedule(ctx, key, s, b.cfg.MaxWait)
	}
	return nil
}

// schedule (re)sets the flush timer of s to d; the flush keeps the context
// of the message that first scheduled it. b.mu is held.
func (b *Buffer) schedule(ctx context.Context, key string, s *session, d time.Duration) {
	tok := s.flush
	if tok == nil {
		tok = &flushToken{ctx: context.WithoutCancel(ctx)}
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	// A fresh token per timer, sharing the context: a timer that fired
	// just before this reset finds its token stale and does nothing.
	tok = &flushToken{ctx: tok.ctx}
	s.flush = tok
	s.timer = time.AfterFunc(d, func() { b.fire(key, tok) })
}

// fire flushes the batch of key when tok is still its scheduled flush.
func (b *Buffer) fire(key string, tok *flushToken) {
	b.mu.Lock()
	s := b.sessions[key]
	if b.closed || s == nil || s.flush != tok {
		b.mu.Unlock()
		return
	}
	batch := s.batch
	s.batch, s.flush, s.timer = nil, nil, nil
	if s.lastActive.IsZero() {
		delete(b.sessions, key)
	}
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	b.forward(tok.ctx, key, batch)
}

func (b *Buffer) forward(ctx context.Context, key string, batch []*envelope.Envelope) {
	msg, err := envelope.FromBatch(batch)
	if err == nil {
		err = b.next(ctx, msg)
	}
	if err != nil {
		b.log.WarnContext(ctx, "channels.flush_failed", "session", key, "messages", len(batch), "err", err)
	}
}

func (b *Buffer) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close stops every timer, forwards the batches still waiting at once
// (nothing buffered is lost) with ctx, and waits for flushes in flight.
// Later messages get [ErrClosed].
func (b *Buffer) Close(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	type pending struct {
		key   string
		batch []*envelope.Envelope
	}
	var left []pending
	for key, s := range b.sessions {
		if s.timer != nil {
			s.timer.Stop()
		}
		if len(s.batch) > 0 {
			left = append(left, pending{key, s.batch})
		}
	}
	b.sessions = map[string]*session{}
	b.mu.Unlock()
	for _, p := range left {
		b.forward(ctx, p.key, p.batch)
	}
	b.wg.Wait()
}
