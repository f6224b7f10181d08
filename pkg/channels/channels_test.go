package channels_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// testChannel is a channel with every optional capability, recording its
// lifecycle in log.
type testChannel struct {
	name     string
	kind     channels.Kind
	disabled bool
	debounce bool
	startErr error
	log      *[]string
}

func (c *testChannel) Name() string               { return c.name }
func (c *testChannel) ChannelKind() channels.Kind { return c.kind }
func (c *testChannel) Enabled() bool              { return !c.disabled }
func (c *testChannel) NeedsDebounce() bool        { return c.debounce }
func (c *testChannel) Stop(context.Context) error { c.record("stop"); return nil }
func (c *testChannel) record(what string)         { *c.log = append(*c.log, what+" "+c.name) }
func (c *testChannel) Start(context.Context) error {
	if c.startErr != nil {
		return c.startErr
	}
	c.record("start")
	return nil
}

var (
	_ channels.Channel   = (*testChannel)(nil)
	_ channels.Kinder    = (*testChannel)(nil)
	_ channels.Toggler   = (*testChannel)(nil)
	_ channels.Debouncer = (*testChannel)(nil)
)

func names(chs []channels.Channel) string {
	var out []string
	for _, ch := range chs {
		out = append(out, ch.Name())
	}
	return strings.Join(out, ",")
}

// TestSelect is behaviour check 79 and the examples of Bub's channel manager.
func TestSelect(t *testing.T) {
	var log []string
	chs := []channels.Channel{
		&testChannel{name: "telegram", log: &log},
		&testChannel{name: "cli", kind: channels.Interface, log: &log},
		&testChannel{name: "mcp.lifecycle", kind: channels.Lifecycle, log: &log},
		&testChannel{name: "other.lifecycle", kind: channels.Lifecycle, log: &log},
		&testChannel{name: "discord", disabled: true, log: &log},
		&testChannel{name: "off.lifecycle", kind: channels.Lifecycle, disabled: true, log: &log},
	}
	for _, tc := range []struct{ enabled, want string }{
		{"all", "telegram,mcp.lifecycle,other.lifecycle"},
		{"cli", "cli,mcp.lifecycle,other.lifecycle"},
		{"cli, !mcp.lifecycle", "cli,other.lifecycle"},
		{"all, !mcp.lifecycle, !telegram", "other.lifecycle"},
		{"mcp.lifecycle", "mcp.lifecycle"},
		{"telegram,!telegram", ""},
		{"", ""},
		{" , ", ""},
		{"nope", ""},
		{"discord", ""},
		{"discord,mcp.lifecycle", "mcp.lifecycle"},
		{"mcp.lifecycle,telegram", "telegram,mcp.lifecycle,other.lifecycle"},
		{"all,cli", "telegram,mcp.lifecycle,other.lifecycle"},
	} {
		if got := names(channels.Select(chs, tc.enabled)); got != tc.want {
			t.Errorf("Select(%q) = %q, want %q", tc.enabled, got, tc.want)
		}
	}
}

type nameOnly string

func (n nameOnly) Name() string { return string(n) }

func TestFromHooks(t *testing.T) {
	var log []string
	ch := &testChannel{name: "a", log: &log}
	got, err := channels.FromHooks([]hooks.Channel{ch})
	if err != nil || len(got) != 1 || got[0] != ch {
		t.Fatalf("FromHooks = %v, %v", got, err)
	}
	if _, err := channels.FromHooks([]hooks.Channel{ch, nameOnly("bare")}); err == nil || !strings.Contains(err.Error(), `"bare"`) {
		t.Fatalf("a channel without Start/Stop: err = %v", err)
	}
}

// sink records forwarded messages.
type sink struct {
	mu   sync.Mutex
	got  []*envelope.Envelope
	fail error
}

func (s *sink) handle(_ context.Context, msg *envelope.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.got = append(s.got, msg)
	return nil
}

func (s *sink) contents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.got {
		out = append(out, m.Content)
	}
	return out
}

func msg(id, content string, active bool) *envelope.Envelope {
	return &envelope.Envelope{ID: id, Content: content, Channel: "telegram", SessionID: "telegram:1", IsActive: active}
}

// TestBufferDebounce runs Bub's buffered handler on a fake clock.
func TestBufferDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		b, err := channels.NewBuffer(channels.BufferConfig{}, out.handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(t.Context())
		ctx := t.Context()
		check := func(step string, want ...string) {
			t.Helper()
			synctest.Wait()
			if got := out.contents(); !slices.Equal(got, want) {
				t.Fatalf("%s: forwarded %q, want %q", step, got, want)
			}
		}

		// Never active: an inactive message is ignored.
		_ = b.Handle(ctx, msg("0", "noise", false))
		time.Sleep(time.Hour)
		check("inactive without a conversation")

		// A comma command bypasses the buffer.
		_ = b.Handle(ctx, msg("c", ",help", false))
		check("comma command", ",help")

		// Active messages are batched until 1s of quiet.
		_ = b.Handle(ctx, msg("1", "hello", true))
		time.Sleep(900 * time.Millisecond)
		_ = b.Handle(ctx, msg("2", "world", true))
		time.Sleep(900 * time.Millisecond)
		check("timer reset by the second active message", ",help")
		time.Sleep(200 * time.Millisecond)
		check("debounced batch", ",help", "hello\nworld")
		if last := out.got[len(out.got)-1]; last.ID != "2" {
			t.Fatalf("merged id %q, want the last message's", last.ID)
		}

		// Inactive inside the window: flushed after max wait (10s).
		time.Sleep(30 * time.Second)
		_ = b.Handle(ctx, msg("3", "aside", false))
		time.Sleep(9 * time.Second)
		check("before max wait", ",help", "hello\nworld")
		time.Sleep(2 * time.Second)
		check("after max wait", ",help", "hello\nworld", "aside")

		// An active message shortens a pending max wait to the debounce.
		_ = b.Handle(ctx, msg("4", "more", false))
		_ = b.Handle(ctx, msg("5", "now", true))
		time.Sleep(1100 * time.Millisecond)
		check("active after inactive", ",help", "hello\nworld", "aside", "more\nnow")

		// Outside the window again: inactive messages are ignored.
		time.Sleep(61 * time.Second)
		_ = b.Handle(ctx, msg("6", "late", false))
		time.Sleep(time.Hour)
		check("inactive after the window", ",help", "hello\nworld", "aside", "more\nnow")
	})
}

func TestBufferSessionsAreIndependentAndCloseFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		b, err := channels.NewBuffer(channels.BufferConfig{Debounce: 5 * time.Second}, out.handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		a := msg("a", "for a", true)
		other := &envelope.Envelope{ID: "b", Content: "for b", Channel: "telegram", ChatID: "2", IsActive: true}
		_ = b.Handle(ctx, a)
		time.Sleep(4 * time.Second)
		_ = b.Handle(ctx, other) // another session: does not delay a
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := out.contents(); !slices.Equal(got, []string{"for a"}) {
			t.Fatalf("forwarded %q, want a's batch only", got)
		}
		b.Close(ctx) // b's batch is forwarded, not lost
		if got := out.contents(); !slices.Equal(got, []string{"for a", "for b"}) {
			t.Fatalf("after Close: %q", got)
		}
		if err := b.Handle(ctx, msg("x", "x", true)); !errors.Is(err, channels.ErrClosed) {
			t.Fatalf("Handle after Close: %v", err)
		}
	})
}

func TestBufferCommaErrorIsReturned(t *testing.T) {
	boom := errors.New("publish failed")
	out := sink{fail: boom}
	b, err := channels.NewBuffer(channels.BufferConfig{}, out.handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(t.Context())
	if err := b.Handle(t.Context(), msg("c", ",tape.info", false)); !errors.Is(err, boom) {
		t.Fatalf("comma command error = %v, want %v", err, boom)
	}
}

func TestBufferConfigValidate(t *testing.T) {
	if _, err := channels.NewBuffer(channels.BufferConfig{Debounce: -1, MaxWait: -1, ActiveWindow: -1}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "debounce") || !strings.Contains(err.Error(), "max wait") || !strings.Contains(err.Error(), "window") {
		t.Fatalf("negative settings: %v", err)
	}
}

func TestManagerRoutesStartsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		var out sink
		m, err := channels.NewManager(channels.BufferConfig{}, out.handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		// Before Start no channel is known.
		if err := m.Handle(ctx, msg("0", "x", true)); !errors.Is(err, channels.ErrUnknownChannel) {
			t.Fatalf("before Start: %v", err)
		}
		tg := &testChannel{name: "telegram", debounce: true, log: &log}
		plain := &testChannel{name: "plain", log: &log}
		if err := m.Start(ctx, []channels.Channel{tg, plain}); err != nil {
			t.Fatal(err)
		}
		if ch, ok := m.Channel("plain"); !ok || ch != plain {
			t.Fatalf("Channel(plain) = %v, %v", ch, ok)
		}
		if _, ok := m.Channel("nope"); ok {
			t.Fatal("Channel(nope) found")
		}
		if err := m.Handle(ctx, &envelope.Envelope{ID: "p", Content: "direct", Channel: "plain"}); err != nil {
			t.Fatal(err)
		}
		if got := out.contents(); !slices.Equal(got, []string{"direct"}) {
			t.Fatalf("plain channel: %q", got)
		}
		if err := m.Handle(ctx, msg("1", "debounced", true)); err != nil {
			t.Fatal(err)
		}
		if got := out.contents(); len(got) != 1 {
			t.Fatalf("debounced message forwarded at once: %q", got)
		}
		if err := m.Handle(ctx, &envelope.Envelope{ID: "u", Content: "x", Channel: "nope"}); !errors.Is(err, channels.ErrUnknownChannel) {
			t.Fatalf("unknown channel: %v", err)
		}
		if err := m.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if got := out.contents(); !slices.Equal(got, []string{"direct", "debounced"}) {
			t.Fatalf("Stop must flush the buffer: %q", got)
		}
		if want := []string{"start telegram", "start plain", "stop plain", "stop telegram"}; !slices.Equal(log, want) {
			t.Fatalf("lifecycle %q, want %q", log, want)
		}
		if err := m.Handle(ctx, &envelope.Envelope{ID: "p", Content: "late", Channel: "plain"}); !errors.Is(err, channels.ErrClosed) {
			t.Fatalf("after Stop: %v", err)
		}
	})
}

func TestManagerStartFailureStopsStartedInReverse(t *testing.T) {
	var log []string
	var out sink
	m, err := channels.NewManager(channels.BufferConfig{}, out.handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("no token")
	chs := []channels.Channel{
		&testChannel{name: "a", log: &log},
		&testChannel{name: "b", log: &log},
		&testChannel{name: "c", startErr: boom, log: &log},
		&testChannel{name: "d", log: &log},
	}
	err = m.Start(t.Context(), chs)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "starting channel c") {
		t.Fatalf("Start = %v", err)
	}
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(log, want) {
		t.Fatalf("lifecycle %q, want %q", log, want)
	}
}
