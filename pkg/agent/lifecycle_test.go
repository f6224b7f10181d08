package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
)

// TestLifecycleOrder: a plain run emits every lifecycle event of docs/events/README.md's table
// in order, each carrying the run id, session and turn state, and a
// general handler (On[events.Event]) sees them all.
func TestLifecycleOrder(t *testing.T) {
	e := newEnv(t, []fakellm.Step{{Text: "hello there"}})
	out := e.mustRun("hi")

	want := []string{
		"RunStarted", "StepStarted", "MessagesPending(start)", "LLMCallStarted",
		"LLMCallFinished", "ChatFinished", "MessagesPending(end)", "StepFinished(ok)",
		"RunFinished(ok)",
	}
	if got := e.log.labels(); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
	for _, ev := range e.log.all() {
		m := ev.EventMeta()
		if m.RunID != testRunID || m.SessionID != testSession || m.State != e.state {
			t.Errorf("%s: meta = {run %q, session %q, state %p}, want {%q, %q, %p}", label(ev), m.RunID, m.SessionID, m.State, testRunID, testSession, e.state)
		}
	}
	if out.Text != "hello there" || !out.OK || out.Steps != 1 || out.Usage == nil {
		t.Errorf("output = %+v", out)
	}
	if e.text() != "hello there" {
		t.Errorf("streamed text = %q", e.text())
	}
	if got := e.state.String("session_id"); got != testSession {
		t.Errorf("state session_id = %q", got)
	}
	chat := eventsOf[*events.ChatFinished](e.log)[0]
	if chat.ResponseText == nil || *chat.ResponseText != "hello there" || chat.Model != "openai:fake" || chat.Provider != "openai" {
		t.Errorf("ChatFinished = %+v", chat)
	}
	// The recorder wrote the run: loop events around the interaction.
	wantTape := []string{
		"anchor:session/start", "event:handoff", "event:loop.start", "event:loop.step.start",
		tape.KindMessage, tape.KindMessage, "event:run", "event:loop.step", "event:loop.finish",
	}
	if got := kinds(e.tape.entries(t)); !slices.Equal(got, wantTape) {
		t.Errorf("tape:\n got %v\nwant %v", got, wantTape)
	}
}

// TestHandlerErrorFailsRun: an error returned by any handler reaches the
// caller of Run and fails the run; the run still ends with RunFinished.
func TestHandlerErrorFailsRun(t *testing.T) {
	boom := errors.New("observer failed")
	cases := []struct {
		name string
		on   func(*events.Bus)
		// wantLast is the last event label the log sees.
		wantLast string
	}{
		{"RunStarted", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.RunStarted) error { return boom })
		}, "RunFinished(error)"},
		{"StepStarted", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.StepStarted) error { return boom })
		}, "RunFinished(error)"},
		{"MessagesPending", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.MessagesPending) error { return boom })
		}, "RunFinished(error)"},
		{"LLMCallStarted", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.LLMCallStarted) error { return boom })
		}, "RunFinished(error)"},
		{"LLMCallFinished", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.LLMCallFinished) error { return boom })
		}, "RunFinished(error)"},
		{"ChatFinished", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.ChatFinished) error { return boom })
		}, "RunFinished(error)"},
		{"StepFinished", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.StepFinished) error { return boom })
		}, "RunFinished(error)"},
		{"RunFinished", func(b *events.Bus) {
			events.On(b, func(context.Context, *events.RunFinished) error { return boom })
		}, "RunFinished(ok)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []fakellm.Step{{Text: "fine"}})
			tc.on(e.bus)
			out, err := e.run("hi")
			if !errors.Is(err, boom) {
				t.Fatalf("err = %v, want the handler's error", err)
			}
			var he *events.HandlerError
			if !errors.As(err, &he) {
				t.Errorf("err = %T, want a *events.HandlerError", err)
			}
			if out.OK {
				t.Errorf("output OK after a failed run: %+v", out)
			}
			labels := e.log.labels()
			if got := labels[len(labels)-1]; got != tc.wantLast {
				t.Errorf("last event = %s, want %s (events %v)", got, tc.wantLast, labels)
			}
			if n := len(eventsOf[*events.RunStarted](e.log)); n != 1 {
				t.Errorf("%d RunStarted", n)
			}
			if n := len(eventsOf[*events.RunFinished](e.log)); n != 1 {
				t.Errorf("%d RunFinished", n)
			}
			// A step that started also finished.
			if s, f := len(eventsOf[*events.StepStarted](e.log)), len(eventsOf[*events.StepFinished](e.log)); s != f {
				t.Errorf("%d StepStarted but %d StepFinished: %v", s, f, labels)
			}
		})
	}
}

// TestRunEchoModel: the echo model answers through the real router with
// the prompt, streamed in deltas, with usage.
func TestRunEchoModel(t *testing.T) {
	e := newEnv(t, nil, echoModel())
	out := e.mustRun("hello echo world")
	if out.Text != "hello echo world" || !out.OK || out.Usage == nil || out.Usage.CompletionTokens != 3 {
		t.Errorf("output %+v", out)
	}
	e.mu.Lock()
	n := len(e.deltas)
	e.mu.Unlock()
	if n != 3 || e.text() != "hello echo world" {
		t.Errorf("%d deltas streaming %q", n, e.text())
	}
	if chat := eventsOf[*events.ChatFinished](e.log)[0]; chat.Model != "echo:echo" || chat.Provider != "echo" {
		t.Errorf("ChatFinished model %q provider %q", chat.Model, chat.Provider)
	}
}
