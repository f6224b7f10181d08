package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/channels/telegram/telegramtest"
	"github.com/bubbus/bub/pkg/envelope"
)

// recorder is a message handler that keeps what it receives.
type recorder struct {
	mu      sync.Mutex
	envs    []*envelope.Envelope
	changed chan struct{}
	// fail, when set, answers a call (0-based) with an error.
	fail func(call int) error
	call int
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) handle(_ context.Context, env *envelope.Envelope) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.call
	r.call++
	if r.fail != nil {
		if err := r.fail(n); err != nil {
			return err
		}
	}
	r.envs = append(r.envs, env)
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// wait returns the first n envelopes once they arrived.
func (r *recorder) wait(ctx context.Context, n int) ([]*envelope.Envelope, error) {
	for {
		r.mu.Lock()
		envs, ch := append([]*envelope.Envelope(nil), r.envs...), r.changed
		r.mu.Unlock()
		if len(envs) >= n {
			return envs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return envs, fmt.Errorf("waiting for %d messages, have %d: %w", n, len(envs), ctx.Err())
		}
	}
}

func (r *recorder) all() []*envelope.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*envelope.Envelope(nil), r.envs...)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newChannel returns a channel talking to srv (configured by edit), not
// started.
func newChannel(t *testing.T, srv *telegramtest.Server, rec *recorder, edit func(*Config)) *Channel {
	t.Helper()
	cfg := Config{Token: srv.Token(), APIBase: srv.URL()}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg, rec.handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startChannel starts c and stops it when the test ends.
func startChannel(t *testing.T, c *Channel) {
	t.Helper()
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// running returns a started channel on a new fake server.
func running(t *testing.T, edit func(*Config)) (*Channel, *telegramtest.Server, *recorder) {
	t.Helper()
	srv := telegramtest.NewServer(t)
	rec := newRecorder()
	c := newChannel(t, srv, rec, edit)
	startChannel(t, c)
	return c, srv, rec
}

// send injects a user message and fails the test if that fails.
func send(t *testing.T, srv *telegramtest.Server, chatID int64, text string, opts ...telegramtest.MessageOption) map[string]any {
	t.Helper()
	m, err := srv.SendUserMessage(chatID, text, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// decode turns a message as the fake server builds it into the wire type.
func decode(t *testing.T, m map[string]any) *message {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var msg message
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	return &msg
}

// botOf is the bot the fake server describes, as getMe tells it.
func botOf(srv *telegramtest.Server) bot {
	return bot{ID: srv.Bot().ID, Username: srv.Bot().Username}
}

func texts(sent []telegramtest.SentMessage) []string {
	var out []string
	for _, s := range sent {
		out = append(out, s.Text)
	}
	return out
}

// typingLoopOf returns the chat's typing loop, nil when none runs.
func (c *Channel) typingLoopOf(chatID string) *typingLoop {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.typing[chatID]
}
