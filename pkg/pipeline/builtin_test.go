package pipeline_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/pipeline"
)

// runner is the builtin's Runner: it records its input and answers with
// run.
type runner struct {
	got []hooks.RunModelInput
	run func(hooks.RunModelInput) (hooks.Stream, error)
}

func (r *runner) RunAgent(_ context.Context, in hooks.RunModelInput) (hooks.Stream, error) {
	r.got = append(r.got, in)
	return r.run(in)
}

// outbox is the builtin's Outbox: it records what it sends.
type outbox struct{ sent []*envelope.Envelope }

func (o *outbox) Send(_ context.Context, env *envelope.Envelope) error {
	o.sent = append(o.sent, env)
	return nil
}

// clock is the date line's time in the tests.
var clock = time.Date(2025, 3, 4, 5, 6, 7, 890, time.FixedZone("UTC+8", 8*3600))

// withBuiltin returns a framework over a registry holding the builtin
// plugin (lowest priority) and then plugins.
func withBuiltin(t *testing.T, r *runner, o *outbox, plugins ...hooks.Plugin) *pipeline.Pipeline {
	t.Helper()
	bp := builtin.New(builtin.Options{Runner: r, Outbox: o, Now: func() time.Time { return clock }})
	reg := newRegistry(t, append([]hooks.Plugin{bp}, plugins...)...)
	bp.SetDispatcher(reg)
	return pipeline.New(reg, workspace, nil)
}

// TestProcessInboundBuiltin runs turns through the builtin plugin alone.
func TestProcessInboundBuiltin(t *testing.T) {
	tests := []struct {
		name       string
		msg        *envelope.Envelope
		wantPrompt string
		wantState  map[string]any
		want       *envelope.Envelope
	}{
		{
			name: "message",
			msg: &envelope.Envelope{ID: "in-1", Content: "hello", Channel: "telegram", ChatID: "42",
				Context: envelope.NewContext("sender_id", "u1", "model", "openai:gpt-4o", "thread_id", "t9")},
			wantPrompt: "sender_id=u1|model=openai:gpt-4o|thread_id=t9|channel=$telegram|chat_id=42\n---Date: 2025-03-04T05:06:07+08:00---\nhello",
			wantState: map[string]any{
				bub.StateWorkspace: workspace, bub.StateSessionID: "telegram:42",
				bub.StateContext: "sender_id=u1|model=openai:gpt-4o|thread_id=t9|channel=$telegram|chat_id=42",
				bub.StateModel:   "openai:gpt-4o", bub.StateThreadID: "t9",
			},
			want: &envelope.Envelope{ID: "in-1/0", SessionID: "telegram:42", Channel: "telegram", ChatID: "42",
				Content: "answer", OutputChannel: "telegram", Kind: envelope.KindNormal,
				InReplyTo: "in-1", BatchIndex: 0, BatchSize: 1},
		},
		{
			name:       "comma command keeps its session and is answered as a command",
			msg:        &envelope.Envelope{ID: "in-2", Content: ",help", Channel: "cli", ChatID: "local", SessionID: "  mine  ", OutputChannel: "cli"},
			wantPrompt: ",help",
			wantState: map[string]any{
				bub.StateWorkspace: workspace, bub.StateSessionID: "  mine  ",
				bub.StateContext: "channel=$cli|chat_id=local",
			},
			want: &envelope.Envelope{ID: "in-2/0", SessionID: "  mine  ", Channel: "cli", ChatID: "local",
				Content: "answer", OutputChannel: "cli", Kind: envelope.KindCommand,
				InReplyTo: "in-2", BatchIndex: 0, BatchSize: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{run: func(hooks.RunModelInput) (hooks.Stream, error) { return hooks.TextStream("answer"), nil }}
			o := &outbox{}
			fw := withBuiltin(t, r, o)

			res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: tt.msg}})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.got) != 1 {
				t.Fatalf("runner ran %d times, want once", len(r.got))
			}
			if got := r.got[0]; got.Prompt.Text != tt.wantPrompt || got.Prompt.Parts != nil || got.State != res.State {
				t.Errorf("runner got prompt %q (parts %v), want %q and the turn state", got.Prompt.Text, got.Prompt.Parts, tt.wantPrompt)
			}
			if got := res.State.Snapshot(); !reflect.DeepEqual(got, tt.wantState) {
				t.Errorf("state = %v, want %v", got, tt.wantState)
			}
			if len(o.sent) != 1 || !reflect.DeepEqual(o.sent[0], tt.want) {
				for _, e := range o.sent {
					t.Logf("sent %+v", *e)
				}
				t.Errorf("want exactly %+v sent", *tt.want)
			}
		})
	}
}

// failingPrompt is a plugin whose build_prompt fails with err.
type failingPrompt struct{ err error }

func (failingPrompt) Name() string { return "failing-prompt" }

func (f failingPrompt) BuildPrompt(context.Context, hooks.BuildPromptInput) (llm.Content, bool, error) {
	return llm.Content{}, false, f.err
}

// TestProcessInboundBuiltinOnError is behaviour check 56 through the
// pipeline: a failed turn is answered by the builtin's on_error with one
// error envelope, whatever stage failed and however the registry wrapped
// the plugin's error.
func TestProcessInboundBuiltinOnError(t *testing.T) {
	tests := []struct {
		name        string
		plugins     []hooks.Plugin
		run         func(hooks.RunModelInput) (hooks.Stream, error)
		wantContent string
	}{
		{
			name:        "build_prompt fails",
			plugins:     []hooks.Plugin{failingPrompt{errBad}},
			wantContent: "An error occurred at stage 'turn': bad",
		},
		{
			name:        "runner fails",
			run:         func(hooks.RunModelInput) (hooks.Stream, error) { return nil, errBad },
			wantContent: "An error occurred at stage 'turn': bad",
		},
		{
			name: "stream fails with a bub error",
			run: func(hooks.RunModelInput) (hooks.Stream, error) {
				return failingStream("partial", bub.Errorf(bub.KindProvider, "rate limited")), nil
			},
			wantContent: "An error occurred at stage 'turn': [provider] rate limited",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := tt.run
			if run == nil {
				run = func(hooks.RunModelInput) (hooks.Stream, error) { return hooks.TextStream("unused"), nil }
			}
			o := &outbox{}
			fw := withBuiltin(t, &runner{run: run}, o, tt.plugins...)
			msg := &envelope.Envelope{ID: "in-9", Content: "hello", Channel: "telegram", ChatID: "42"}

			_, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})
			if err == nil {
				t.Fatal("turn succeeded, want a failure")
			}
			want := &envelope.Envelope{
				ID: "in-9/error/turn", SessionID: "telegram:42", Channel: "telegram", ChatID: "42",
				Content: tt.wantContent, Kind: envelope.KindError, OutputChannel: "telegram",
				InReplyTo: "in-9", BatchSize: 1,
			}
			if len(o.sent) != 1 || !reflect.DeepEqual(o.sent[0], want) {
				for _, e := range o.sent {
					t.Logf("sent %+v", *e)
				}
				t.Errorf("want exactly one dispatch of %+v", *want)
			}
		})
	}
}

// TestProcessInboundBuiltinErrorRepliesAreDistinct: a run_model report and
// a later turn failure are two error replies with distinct ids, so neither
// is deduplicated away.
func TestProcessInboundBuiltinErrorRepliesAreDistinct(t *testing.T) {
	// declines has the highest-priority model hook and no answer, so the
	// turn has no model output; its render_outbound then fails.
	declines := &plug{name: "declines",
		runModel:       func(hooks.RunModelInput) (string, bool, error) { return "", false, nil },
		renderOutbound: func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error) { return nil, errBad },
	}
	o := &outbox{}
	r := &runner{run: func(hooks.RunModelInput) (hooks.Stream, error) { return hooks.TextStream("unused"), nil }}
	fw := withBuiltin(t, r, o, declines)

	_, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: inbound()}})
	if !errors.Is(err, errBad) {
		t.Fatalf("turn error = %v, want %v", err, errBad)
	}
	if len(r.got) != 0 {
		t.Error("the builtin runner ran although a higher plugin picked the run_model path")
	}
	var got [][2]string
	for _, e := range o.sent {
		got = append(got, [2]string{e.ID, e.Content})
	}
	want := [][2]string{
		{"in-1/error/run_model", "An error occurred at stage 'run_model': no model skill returned output"},
		{"in-1/error/turn", "An error occurred at stage 'turn': bad"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("error replies = %q, want %q", got, want)
	}
}
