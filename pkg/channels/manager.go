package channels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// ErrUnknownChannel is returned for a message whose channel is not one
// the [Manager] runs.
var ErrUnknownChannel = errors.New("channels: unknown channel")

// ErrUndeliverable marks a [Sender] error that retrying cannot fix (the
// chat is gone, the message is refused): the gateway dead-letters the
// outbound envelope at once instead of redelivering it.
var ErrUndeliverable = errors.New("channels: undeliverable")

// RetryAfter is implemented by a [Sender] error that says how long to
// wait before sending again (a rate limit's retry after): the gateway
// redelivers the outbound envelope no sooner.
type RetryAfter interface {
	error
	Wait() time.Duration
}

// Manager runs the selected channels of a gateway (Bub's ChannelManager
// without admission, which the workers own): it starts them in order,
// routes the messages they hand to [Manager.Handle] to the next handler —
// through a [Buffer] for channels that need debounce — and stops every
// started channel in reverse order.
//
// Provide_channels needs a handler before any channel exists, so a
// Manager is built first and its Handle given to the providers; the
// channels they return are then selected (see [Select]) and passed to
// [Manager.Start].
type Manager struct {
	next hooks.MessageHandler
	buf  *Buffer
	log  *slog.Logger

	mu      sync.RWMutex
	stopped bool
	byName  map[string]Channel
	started []Channel
}

// NewManager returns a manager forwarding messages to next.
func NewManager(cfg BufferConfig, next hooks.MessageHandler, log *slog.Logger) (*Manager, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	buf, err := NewBuffer(cfg, next, log)
	if err != nil {
		return nil, err
	}
	return &Manager{next: next, buf: buf, log: log, byName: map[string]Channel{}}, nil
}

// Handle is the [hooks.MessageHandler] of the managed channels (Bub's
// on_receive). A message of a channel the manager does not run gets
// [ErrUnknownChannel]; one of a channel that needs debounce is buffered
// per raw session id; any other is forwarded at once and the next
// handler's error returned.
func (m *Manager) Handle(ctx context.Context, msg *envelope.Envelope) error {
	m.mu.RLock()
	ch, ok := m.byName[msg.Channel]
	stopped := m.stopped
	m.mu.RUnlock()
	switch {
	case stopped:
		return ErrClosed
	case !ok:
		m.log.WarnContext(ctx, "channels.unknown_channel", "channel", msg.Channel, "id", msg.ID)
		return fmt.Errorf("%w %q", ErrUnknownChannel, msg.Channel)
	case NeedsDebounce(ch):
		return m.buf.Handle(ctx, msg)
	}
	return m.next(ctx, msg)
}

// Start starts the selected channels in order; they run until
// [Manager.Stop] or until ctx ends. When one fails to start, those already
// started are stopped in reverse order and the error is returned. Start is
// called once.
func (m *Manager) Start(ctx context.Context, selected []Channel) error {
	m.mu.Lock()
	for _, ch := range selected {
		m.byName[ch.Name()] = ch
	}
	m.mu.Unlock()
	for _, ch := range selected {
		if err := ch.Start(ctx); err != nil {
			err = fmt.Errorf("starting channel %s: %w", ch.Name(), err)
			return errors.Join(err, m.Stop(context.WithoutCancel(ctx)))
		}
		m.mu.Lock()
		m.started = append(m.started, ch)
		m.mu.Unlock()
		m.log.InfoContext(ctx, "channels.started", "channel", ch.Name())
	}
	return nil
}

// Stop stops every started channel in reverse order (so intake ends),
// then forwards what debounce still holds, and returns the channels'
// errors. Later messages get [ErrClosed].
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	started := m.started
	m.started = nil
	m.mu.Unlock()
	var errs []error
	for _, ch := range slices.Backward(started) {
		if err := ch.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping channel %s: %w", ch.Name(), err))
		}
	}
	m.buf.Close(ctx)
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	return errors.Join(errs...)
}

// Channel returns the running channel named name.
func (m *Manager) Channel(name string) (Channel, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ch, ok := m.byName[name]
	return ch, ok
}
