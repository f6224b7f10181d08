package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// runner is the Runner collaborator: it records its input and answers
// with stream and err.
type runner struct {
	got    []hooks.RunModelInput
	stream hooks.Stream
	err    error
}

func (r *runner) RunAgent(_ context.Context, in hooks.RunModelInput) (hooks.Stream, error) {
	r.got = append(r.got, in)
	return r.stream, r.err
}

// outbox is the Outbox collaborator: it records what it is given and
// fails with err.
type outbox struct {
	sent []*envelope.Envelope
	err  error
}

func (o *outbox) Send(_ context.Context, env *envelope.Envelope) error {
	o.sent = append(o.sent, env)
	return o.err
}

// switches is the SwitchReader collaborator: the latest switches per
// session.
type switches struct {
	latest map[string]tape.Switches
	err    error
}

func (s *switches) LatestSwitches(_ context.Context, sessionID string) (tape.Switches, error) {
	return s.latest[sessionID], s.err
}

// dispatcher is the Dispatcher collaborator (the registry in production).
type dispatcher struct {
	got []*envelope.Envelope
	err error
}

func (d *dispatcher) DispatchOutbound(_ context.Context, in hooks.DispatchOutboundInput) (bool, error) {
	d.got = append(d.got, in.Message)
	return d.err == nil, d.err
}

// newPlugin returns the builtin with o's collaborators, a test runner and
// outbox filling in when o has none.
func newPlugin(t *testing.T, o builtin.Options) *builtin.Plugin {
	t.Helper()
	if o.Runner == nil {
		o.Runner = &runner{stream: hooks.TextStream("answer")}
	}
	if o.Outbox == nil {
		o.Outbox = &outbox{}
	}
	p := builtin.New(o)
	return p
}

func TestWithoutRuntime(t *testing.T) {
	p := builtin.New(builtin.Options{})
	if p.Name() != builtin.Name || builtin.Name != "builtin" {
		t.Errorf("name = %q, want builtin", p.Name())
	}
	if _, ok, err := p.RunModelStream(context.Background(), hooks.RunModelInput{}); ok || !errors.Is(err, builtin.ErrNoRuntime) {
		t.Errorf("RunModelStream without a runner = ok %v, %v; want ErrNoRuntime", ok, err)
	}
	if sent, err := p.DispatchOutbound(context.Background(), hooks.DispatchOutboundInput{Message: &envelope.Envelope{ID: "x"}}); sent || !errors.Is(err, builtin.ErrNoRuntime) {
		t.Errorf("DispatchOutbound without an outbox = %v, %v; want ErrNoRuntime", sent, err)
	}
}

// TestResolveSession is behaviour check 48.
func TestResolveSession(t *testing.T) {
	tests := []struct {
		name string
		msg  envelope.Envelope
		want string
	}{
		{"session id returned untrimmed", envelope.Envelope{SessionID: "  keep-me  ", Channel: "telegram", ChatID: "42"}, "  keep-me  "},
		{"blank session id", envelope.Envelope{SessionID: "   ", Channel: "telegram", ChatID: "42"}, "telegram:42"},
		{"no session id", envelope.Envelope{Channel: "telegram", ChatID: "42"}, "telegram:42"},
		{"nothing at all", envelope.Envelope{}, "default:default"},
	}
	p := newPlugin(t, builtin.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := p.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: &tt.msg})
			if err != nil || !ok || got != tt.want {
				t.Errorf("ResolveSession = %q, %v, %v; want %q, true, nil", got, ok, err, tt.want)
			}
		})
	}
}

// TestLoadState covers behaviour check 50 and the rest of the builtin's
// load_state: the session's latest switches, the per-message model
// override, the steering thread id and the context string.
func TestLoadState(t *testing.T) {
	sw := &switches{latest: map[string]tape.Switches{
		"s1":      {Model: "openai:gpt-4o", ReasoningEffort: "high"},
		"s-model": {Model: "openai:gpt-4o"},
	}}
	tests := []struct {
		name     string
		switches builtin.SwitchReader
		session  string
		context  *envelope.Context
		want     map[string]any
	}{
		{"no switches collaborator", nil, "s1", nil,
			map[string]any{"session_id": "s1"}},
		{"latest switches restored", sw, "s1", nil,
			map[string]any{"session_id": "s1", "model": "openai:gpt-4o", "reasoning_effort": "high"}},
		{"model switch only", sw, "s-model", nil,
			map[string]any{"session_id": "s-model", "model": "openai:gpt-4o"}},
		{"unknown session inherits nothing", sw, "s2", nil,
			map[string]any{"session_id": "s2"}},
		{"message model overrides the switch", sw, "s1", envelope.NewContext("model", "anthropic:claude"),
			map[string]any{"session_id": "s1", "model": "anthropic:claude", "reasoning_effort": "high", "context": "model=anthropic:claude"}},
		{"thread id and context string", nil, "s1", envelope.NewContext("sender_id", "u1", "_hidden", "x", "thread_id", "t-7"),
			map[string]any{"session_id": "s1", "_runtime_thread_id": "t-7", "context": "sender_id=u1|thread_id=t-7"}},
		{"empty context values are no override", sw, "s1", envelope.NewContext("model", "", "thread_id", ""),
			map[string]any{"session_id": "s1", "model": "openai:gpt-4o", "reasoning_effort": "high", "context": "model=|thread_id="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, builtin.Options{Switches: tt.switches})
			msg := &envelope.Envelope{Content: "x", Context: tt.context}
			got, err := p.LoadState(t.Context(), hooks.LoadStateInput{Message: msg, SessionID: tt.session})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadState = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("switches failure", func(t *testing.T) {
		errTape := errors.New("tape unavailable")
		p := newPlugin(t, builtin.Options{Switches: &switches{err: errTape}})
		_, err := p.LoadState(t.Context(), hooks.LoadStateInput{Message: &envelope.Envelope{}, SessionID: "s1"})
		if !errors.Is(err, errTape) {
			t.Errorf("LoadState error = %v, want %v", err, errTape)
		}
	})
}

// TestBuildPromptText is behaviour check 51: comma commands are returned
// raw and mark the message a command; other content gets the context line
// and the date line, both only when the message has a context (Bub's
// context_prefix).
func TestBuildPromptText(t *testing.T) {
	image := []envelope.Media{{Type: "image", MimeType: "image/png", URL: "data:image/png;base64,iVBO"}}
	cst := time.Date(2025, 3, 4, 5, 6, 7, 890_000_000, time.FixedZone("CST", 8*3600))
	tests := []struct {
		name     string
		now      time.Time
		msg      envelope.Envelope
		want     string
		wantKind string
	}{
		{"comma command, even with media", cst,
			envelope.Envelope{Content: ",help", Kind: envelope.KindNormal, Media: image, Context: envelope.NewContext("a", "b")},
			",help", envelope.KindCommand},
		{"a leading space is no command", cst,
			envelope.Envelope{Content: " ,help", Kind: envelope.KindNormal},
			" ,help", envelope.KindNormal},
		{"context line, date line, content", cst,
			envelope.Envelope{Content: "hello", Kind: envelope.KindNormal, Context: envelope.NewContext("sender_id", "u1", "channel", "$telegram")},
			"sender_id=u1|channel=$telegram\n---Date: 2025-03-04T05:06:07+08:00---\nhello", envelope.KindNormal},
		// Bub's context_prefix: both lines, or neither.
		{"no context: neither context line nor date line", cst,
			envelope.Envelope{Content: "hello", Kind: envelope.KindNormal},
			"hello", envelope.KindNormal},
		{"only runtime keys: no context, no date line", cst,
			envelope.Envelope{Content: "hello", Context: envelope.NewContext("_x", "y")},
			"hello", ""},
		{"UTC offset is +00:00", time.Date(2025, 12, 31, 23, 59, 59, 0, time.UTC),
			envelope.Envelope{Content: "hello", Context: envelope.NewContext("a", "b")},
			"a=b\n---Date: 2025-12-31T23:59:59+00:00---\nhello", ""},
		{"negative offset", time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("NST", -(3*3600+30*60))),
			envelope.Envelope{Content: "hello", Context: envelope.NewContext("a", "b")},
			"a=b\n---Date: 2025-01-02T03:04:05-03:30---\nhello", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, builtin.Options{Now: func() time.Time { return tt.now }})
			msg := tt.msg
			got, ok, err := p.BuildPrompt(t.Context(), hooks.BuildPromptInput{Message: &msg, SessionID: "s", State: bub.NewState(nil)})
			if err != nil || !ok {
				t.Fatalf("BuildPrompt = %v, %v", ok, err)
			}
			if !reflect.DeepEqual(got, llm.Text(tt.want)) {
				t.Errorf("prompt = %#v, want text %q", got, tt.want)
			}
			if msg.Kind != tt.wantKind {
				t.Errorf("message kind = %q, want %q", msg.Kind, tt.wantKind)
			}
		})
	}
}

// TestBuildPromptMedia is behaviour check 52: image and video URLs become
// URL parts, inline audio becomes input_audio, everything else is left
// out, and without parts the prompt stays plain text.
func TestBuildPromptMedia(t *testing.T) {
	const text = "a=b\n---Date: 2025-03-04T05:06:07+00:00---\nlook"
	withParts := func(parts ...llm.Part) llm.Content {
		return llm.Content{Parts: append([]llm.Part{{Type: "text", Text: text}}, parts...)}
	}
	tests := []struct {
		name  string
		media []envelope.Media
		want  llm.Content
	}{
		{"image data URL",
			[]envelope.Media{{Type: "image", MimeType: "image/png", URL: "data:image/png;base64,iVBO"}},
			withParts(llm.Part{Type: "image_url", ImageURL: &llm.URLPart{URL: "data:image/png;base64,iVBO"}})},
		{"video URL",
			[]envelope.Media{{Type: "video", MimeType: "video/mp4", URL: "https://example.com/v.mp4"}},
			withParts(llm.Part{Type: "video_url", VideoURL: &llm.URLPart{URL: "https://example.com/v.mp4"}})},
		{"remote audio is skipped",
			[]envelope.Media{{Type: "audio", MimeType: "audio/ogg", URL: "https://example.com/a.ogg"}},
			llm.Text(text)},
		{"inline x-wav audio",
			[]envelope.Media{{Type: "audio", MimeType: "audio/x-wav", URL: "data:audio/x-wav;base64,UklGRg=="}},
			withParts(llm.Part{Type: "input_audio", InputAudio: &llm.AudioPart{Data: "UklGRg==", Format: "wav"}})},
		{"inline audio with parameters",
			[]envelope.Media{{Type: "audio", MimeType: "audio/ogg", URL: "data:audio/ogg;codecs=opus;base64,T2dn"}},
			withParts(llm.Part{Type: "input_audio", InputAudio: &llm.AudioPart{Data: "T2dn", Format: "ogg"}})},
		{"inline audio that is not base64 is skipped",
			[]envelope.Media{{Type: "audio", MimeType: "audio/wav", URL: "data:audio/wav,raw"}},
			llm.Text(text)},
		{"audio item with a non-audio data URL is skipped",
			[]envelope.Media{{Type: "audio", MimeType: "audio/wav", URL: "data:image/png;base64,iVBO"}},
			llm.Text(text)},
		{"media without a URL is skipped",
			[]envelope.Media{{Type: "image", MimeType: "image/png"}},
			llm.Text(text)},
		{"documents are skipped",
			[]envelope.Media{{Type: "document", MimeType: "application/pdf", URL: "data:application/pdf;base64,JVBE"}},
			llm.Text(text)},
		{"parts keep the media order",
			[]envelope.Media{
				{Type: "video", URL: "https://example.com/v.mp4"},
				{Type: "document", URL: "https://example.com/d.pdf"},
				{Type: "audio", URL: "data:audio/mpeg;base64,SUQz"},
				{Type: "image", URL: "https://example.com/i.jpg"},
			},
			withParts(
				llm.Part{Type: "video_url", VideoURL: &llm.URLPart{URL: "https://example.com/v.mp4"}},
				llm.Part{Type: "input_audio", InputAudio: &llm.AudioPart{Data: "SUQz", Format: "mp3"}},
				llm.Part{Type: "image_url", ImageURL: &llm.URLPart{URL: "https://example.com/i.jpg"}},
			)},
	}
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, builtin.Options{Now: func() time.Time { return now }})
			msg := &envelope.Envelope{Content: "look", Media: tt.media, Context: envelope.NewContext("a", "b")}
			got, _, err := p.BuildPrompt(t.Context(), hooks.BuildPromptInput{Message: msg})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("prompt = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAudioFormat(t *testing.T) {
	tests := []struct{ mime, want string }{
		{"audio/aiff", "aiff"},
		{"audio/x-aiff", "aiff"},
		{"audio/flac", "flac"},
		{"audio/x-flac", "flac"},
		{"audio/mp4", "m4a"},
		{"audio/x-m4a", "m4a"},
		{"audio/mpeg", "mp3"},
		{"audio/ogg", "ogg"},
		{"audio/wav", "wav"},
		{"audio/x-wav", "wav"},
		{"audio/webm", "webm"},
		{"Audio/X-WAV", "wav"},
		{"audio/ogg; codecs=opus", "ogg"},
		{" audio/wav ;rate=16000", "wav"},
		{"audio/amr", "amr"},
		{"AUDIO/L16;rate=8000", "l16"},
		{"application/octet-stream", "application/octet-stream"},
		{"audio/", "unknown"},
		{"", "unknown"},
		{";codecs=x", "unknown"},
	}
	for _, tt := range tests {
		if got := builtin.AudioFormat(tt.mime); got != tt.want {
			t.Errorf("AudioFormat(%q) = %q, want %q", tt.mime, got, tt.want)
		}
	}
}

// TestRunModelStream covers behaviour check 53: the runner gets the
// turn's input, and with it the state's model (the per-message override
// load_state stored), or none.
func TestRunModelStream(t *testing.T) {
	tests := []struct {
		name      string
		context   *envelope.Context
		wantModel string
	}{
		{"message model", envelope.NewContext("model", "anthropic:claude-sonnet"), "anthropic:claude-sonnet"},
		{"no model", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{stream: hooks.TextStream("streamed")}
			p := newPlugin(t, builtin.Options{Runner: r})
			msg := &envelope.Envelope{Content: "hi", Context: tt.context}
			loaded, err := p.LoadState(t.Context(), hooks.LoadStateInput{Message: msg, SessionID: "s1"})
			if err != nil {
				t.Fatal(err)
			}
			in := hooks.RunModelInput{Prompt: llm.Text("hi"), SessionID: "s1", State: bub.NewState(loaded)}
			s, ok, err := p.RunModelStream(t.Context(), in)
			if err != nil || !ok {
				t.Fatalf("RunModelStream = %v, %v", ok, err)
			}
			if text, err := s.Text(); err != nil || text != "streamed" {
				t.Errorf("stream text = %q, %v; want the runner's stream", text, err)
			}
			if len(r.got) != 1 || !reflect.DeepEqual(r.got[0].Prompt, in.Prompt) || r.got[0].SessionID != "s1" || r.got[0].State != in.State {
				t.Fatalf("runner got %+v, want the hook's input", r.got)
			}
			if got := r.got[0].State.String(bub.StateModel); got != tt.wantModel {
				t.Errorf("runner's state model = %q, want %q", got, tt.wantModel)
			}
		})
	}

	t.Run("runner failure", func(t *testing.T) {
		errRun := errors.New("agent down")
		p := newPlugin(t, builtin.Options{Runner: &runner{err: errRun}})
		_, ok, err := p.RunModelStream(t.Context(), hooks.RunModelInput{State: bub.NewState(nil)})
		if ok || !errors.Is(err, errRun) {
			t.Errorf("RunModelStream = %v, %v; want false and %v", ok, err, errRun)
		}
	})
}

func TestSaveStatePersistsNothing(t *testing.T) {
	p := newPlugin(t, builtin.Options{})
	state := bub.NewState(map[string]any{"k": "v"})
	if err := p.SaveState(t.Context(), hooks.SaveStateInput{SessionID: "s", State: state, Err: errors.New("model failed")}); err != nil {
		t.Errorf("SaveState = %v", err)
	}
	if got := state.Snapshot(); !reflect.DeepEqual(got, map[string]any{"k": "v"}) {
		t.Errorf("state changed to %v", got)
	}
}

// TestRenderOutbound is behaviour check 57 and its defaults.
func TestRenderOutbound(t *testing.T) {
	tests := []struct {
		name string
		msg  envelope.Envelope
		want envelope.Envelope
	}{
		{"keeps channel, chat, output channel and kind",
			envelope.Envelope{ID: "in", Channel: "telegram", ChatID: "42", OutputChannel: "cli", Kind: envelope.KindCommand, Content: "question", Media: []envelope.Media{{Type: "image"}}},
			envelope.Envelope{SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "cli", Kind: envelope.KindCommand, Content: "the output"}},
		{"defaults",
			envelope.Envelope{Content: "question"},
			envelope.Envelope{SessionID: "s1", Channel: "default", ChatID: "default", OutputChannel: "default", Kind: envelope.KindNormal, Content: "the output"}},
	}
	p := newPlugin(t, builtin.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.RenderOutbound(t.Context(), hooks.RenderOutboundInput{Message: &tt.msg, SessionID: "s1", State: bub.NewState(nil), ModelOutput: "the output"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !reflect.DeepEqual(*got[0], tt.want) {
				t.Errorf("RenderOutbound = %+v, want exactly %+v", got, tt.want)
			}
		})
	}
}

func TestDispatchOutbound(t *testing.T) {
	env := &envelope.Envelope{ID: "out-1", Content: "x"}

	o := &outbox{}
	p := newPlugin(t, builtin.Options{Outbox: o})
	sent, err := p.DispatchOutbound(t.Context(), hooks.DispatchOutboundInput{Message: env})
	if err != nil || !sent || len(o.sent) != 1 || o.sent[0] != env {
		t.Errorf("DispatchOutbound = %v, %v, outbox got %v; want true, nil and the envelope", sent, err, o.sent)
	}

	errPub := errors.New("publish failed")
	p = newPlugin(t, builtin.Options{Outbox: &outbox{err: errPub}})
	sent, err = p.DispatchOutbound(t.Context(), hooks.DispatchOutboundInput{Message: env})
	if sent || !errors.Is(err, errPub) {
		t.Errorf("DispatchOutbound = %v, %v; want false and %v", sent, err, errPub)
	}
}

// TestOnError is behaviour check 56 and the shape of the error reply.
func TestOnError(t *testing.T) {
	msg := &envelope.Envelope{ID: "in-1", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "cli", Content: "x"}
	tests := []struct {
		name        string
		stage       string
		err         error
		msg         *envelope.Envelope
		wantContent string
		want        envelope.Envelope // everything but the content
	}{
		{"plain error", "turn", errors.New("bad"), msg,
			"An error occurred at stage 'turn': bad",
			envelope.Envelope{ID: "in-1/error/turn", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "telegram", Kind: envelope.KindError, InReplyTo: "in-1", BatchSize: 1}},
		{"bub error", "run_model", bub.Errorf(bub.KindTool, "boom"), msg,
			"An error occurred at stage 'run_model': [tool] boom",
			envelope.Envelope{ID: "in-1/error/run_model", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "telegram", Kind: envelope.KindError, InReplyTo: "in-1", BatchSize: 1}},
		{"registry attribution is not shown", "turn", &hooks.HookError{Hook: hooks.HookBuildPrompt, Plugin: "p", Err: errors.New("bad")}, msg,
			"An error occurred at stage 'turn': bad",
			envelope.Envelope{ID: "in-1/error/turn", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "telegram", Kind: envelope.KindError, InReplyTo: "in-1", BatchSize: 1}},
		{"wrapped bub error", "turn", fmt.Errorf("run_model: %w", &hooks.HookError{Hook: hooks.HookRunModelStream, Plugin: "p", Err: bub.Errorf(bub.KindProvider, "down")}), msg,
			"An error occurred at stage 'turn': [provider] down",
			envelope.Envelope{ID: "in-1/error/turn", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "telegram", Kind: envelope.KindError, InReplyTo: "in-1", BatchSize: 1}},
		{"other wrapping is kept", "turn", fmt.Errorf("run_model: %w", errors.New("bad")), msg,
			"An error occurred at stage 'turn': run_model: bad",
			envelope.Envelope{ID: "in-1/error/turn", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "telegram", Kind: envelope.KindError, InReplyTo: "in-1", BatchSize: 1}},
		{"no error value", "turn", nil, msg,
			"An error occurred at stage 'turn': unknown error",
			envelope.Envelope{ID: "in-1/error/turn", SessionID: "s1", Channel: "telegram", ChatID: "42", OutputChannel: "telegram", Kind: envelope.KindError, InReplyTo: "in-1", BatchSize: 1}},
		{"defaults", "turn", errors.New("bad"), &envelope.Envelope{ID: "in-2"},
			"An error occurred at stage 'turn': bad",
			envelope.Envelope{ID: "in-2/error/turn", SessionID: "unknown", Channel: "default", ChatID: "default", OutputChannel: "default", Kind: envelope.KindError, InReplyTo: "in-2", BatchSize: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &dispatcher{}
			p := newPlugin(t, builtin.Options{Dispatch: d})
			if err := p.OnError(t.Context(), hooks.OnErrorInput{Stage: tt.stage, Err: tt.err, Message: tt.msg}); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Content = tt.wantContent
			if len(d.got) != 1 || !reflect.DeepEqual(*d.got[0], want) {
				t.Errorf("dispatched %+v, want exactly %+v", d.got, want)
			}
		})
	}

	t.Run("no message: nothing to answer", func(t *testing.T) {
		d := &dispatcher{}
		p := newPlugin(t, builtin.Options{Dispatch: d})
		if err := p.OnError(t.Context(), hooks.OnErrorInput{Stage: "turn", Err: errors.New("bad")}); err != nil || len(d.got) != 0 {
			t.Errorf("OnError = %v, dispatched %v; want nil and nothing", err, d.got)
		}
	})
	t.Run("dispatcher set later", func(t *testing.T) {
		p := newPlugin(t, builtin.Options{})
		if err := p.OnError(t.Context(), hooks.OnErrorInput{Stage: "turn", Err: errors.New("bad"), Message: msg}); err != nil {
			t.Errorf("OnError without a dispatcher = %v", err)
		}
		d := &dispatcher{}
		p.SetDispatcher(d)
		if err := p.OnError(t.Context(), hooks.OnErrorInput{Stage: "turn", Err: errors.New("bad"), Message: msg}); err != nil || len(d.got) != 1 {
			t.Errorf("OnError = %v, dispatched %d envelopes; want nil and one", err, len(d.got))
		}
	})
	t.Run("dispatch failure is returned", func(t *testing.T) {
		errPub := errors.New("publish failed")
		p := newPlugin(t, builtin.Options{Dispatch: &dispatcher{err: errPub}})
		if err := p.OnError(t.Context(), hooks.OnErrorInput{Stage: "turn", Err: errors.New("bad"), Message: msg}); !errors.Is(err, errPub) {
			t.Errorf("OnError = %v, want %v", err, errPub)
		}
	})
}

// TestOnErrorThroughRegistry: on_error dispatches through the registry, so
// every dispatch_outbound implementation (the builtin's outbox included)
// sees the one error envelope.
func TestOnErrorThroughRegistry(t *testing.T) {
	o := &outbox{}
	p := newPlugin(t, builtin.Options{Outbox: o})
	other := &dispatcher{}
	reg := hooks.New[struct{}, struct{}]()
	reg.MustRegister(p)
	reg.MustRegister(namedDispatcher{other})
	p.SetDispatcher(reg)

	reg.NotifyError(t.Context(), hooks.OnErrorInput{Stage: "turn", Err: errors.New("bad"), Message: &envelope.Envelope{ID: "in-1", Channel: "cli"}})

	if len(o.sent) != 1 || len(other.got) != 1 || o.sent[0] != other.got[0] {
		t.Fatalf("outbox got %v, other plugin got %v; want the same single envelope", o.sent, other.got)
	}
	if got := o.sent[0]; got.Kind != envelope.KindError || got.Content != "An error occurred at stage 'turn': bad" {
		t.Errorf("error envelope = %+v", *got)
	}
}

// namedDispatcher is a dispatch_outbound plugin over a dispatcher.
type namedDispatcher struct{ *dispatcher }

func (namedDispatcher) Name() string { return "other" }

// TestBeforeToolCall is behaviour check 58: unknown-tool recovery.
func TestBeforeToolCall(t *testing.T) {
	reg := &tools.Registry{}
	noop := func(context.Context, *tools.Context, map[string]any) (any, error) { return nil, nil }
	for _, name := range []string{"bash", "bash.output", "fs.read", "skill"} {
		if err := reg.Register(tools.Tool{Name: name, Handler: noop}); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(tools.Tool{Name: "secret.admin", Hidden: true, Handler: noop}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		call     tools.Call
		contains []string // empty: no decision
	}{
		{"known tool", tools.Call{Tool: "bash", CallID: "c1"}, nil},
		{"known dotted tool by model name", tools.Call{Tool: "bash_output", CallID: "c1"}, nil},
		{"runtime name is not a model name", tools.Call{Tool: "fs.read", CallID: "c1"}, []string{"Tool `fs.read` does not exist", "- fs_read"}},
		{"typo suggests the close match", tools.Call{Tool: "fs_reed", CallID: "c1"}, []string{"Tool `fs_reed` does not exist. Did you mean", "- fs_read"}},
		{"nothing close: use the skill tool", tools.Call{Tool: "tepadr", CallID: "c1"}, []string{"Tool `tepadr` does not exist", "`skill`"}},
		{"hidden tools are unknown to the model", tools.Call{Tool: "secret_admin", CallID: "c1"}, []string{"Tool `secret_admin` does not exist"}},
		{"direct command is untouched", tools.Call{Tool: "tepadr"}, nil},
		{"direct command may run hidden tools", tools.Call{Tool: "secret_admin"}, nil},
	}
	p := newPlugin(t, builtin.Options{Tools: reg})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, err := p.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: tt.call, State: bub.NewState(nil)})
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.contains) == 0 {
				if dec != nil {
					t.Errorf("decision = %+v, want none", *dec)
				}
				return
			}
			if dec == nil || dec.Action != tools.ActionReplace {
				t.Fatalf("decision = %+v, want replace", dec)
			}
			text, _ := dec.Result.(string)
			for _, s := range tt.contains {
				if !strings.Contains(text, s) {
					t.Errorf("guidance %q lacks %q", text, s)
				}
			}
		})
	}

	t.Run("no tools at all", func(t *testing.T) {
		p := newPlugin(t, builtin.Options{})
		dec, err := p.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: tools.Call{Tool: "bash", CallID: "c1"}})
		if err != nil || dec == nil || dec.Result != "Tool `bash` does not exist. No similar tool is available." {
			t.Errorf("decision = %+v, %v", dec, err)
		}
	})
}

func TestContinuePrompt(t *testing.T) {
	tests := []struct {
		name  string
		state *bub.State
		want  string
	}{
		{"no state", nil, "Continue the task until all targets are completed."},
		{"no context", bub.NewState(map[string]any{"session_id": "s"}), "Continue the task until all targets are completed."},
		{"with context", bub.NewState(map[string]any{"context": "sender_id=u1|channel=$cli"}),
			"Continue the task until all targets are completed. [context: sender_id=u1|channel=$cli]"},
	}
	p := newPlugin(t, builtin.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := p.ContinuePrompt(t.Context(), hooks.ContinuePromptInput{Step: 1, State: tt.state})
			if err != nil || !ok || got != tt.want {
				t.Errorf("ContinuePrompt = %q, %v, %v; want %q", got, ok, err, tt.want)
			}
		})
	}
}

// TestSystemPrompt is behaviour check 55: the default prompt, "\n\n" and
// the workspace's trimmed AGENTS.md ("" when missing or unreadable).
func TestSystemPrompt(t *testing.T) {
	withRules := t.TempDir()
	writeFile(t, filepath.Join(withRules, "AGENTS.md"), "\n  local rules\n\n")
	unreadable := t.TempDir()
	if err := os.Mkdir(filepath.Join(unreadable, "AGENTS.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		workspace string
		want      string
	}{
		{"AGENTS.md", withRules, builtin.DefaultSystemPrompt + "\n\nlocal rules"},
		{"no AGENTS.md", t.TempDir(), builtin.DefaultSystemPrompt + "\n\n"},
		{"unreadable AGENTS.md", unreadable, builtin.DefaultSystemPrompt + "\n\n"},
	}
	p := newPlugin(t, builtin.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := bub.NewState(map[string]any{bub.StateWorkspace: tt.workspace})
			got, err := p.SystemPrompt(t.Context(), hooks.SystemPromptInput{Prompt: "p", State: state})
			if err != nil || got != tt.want {
				t.Errorf("SystemPrompt = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	for _, section := range []string{"<general_instruct>", "</general_instruct>", "<response_instruct>", "$telegram", "</response_instruct>", "<context_contract>", "tape.info", "tape.handoff", "</context_contract>"} {
		if !strings.Contains(builtin.DefaultSystemPrompt, section) {
			t.Errorf("default system prompt lacks %q", section)
		}
	}
}

// TestSystemPromptCurrentDirectory: without a workspace in the state, or
// without a state, AGENTS.md comes from the current directory.
func TestSystemPromptCurrentDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "AGENTS.md"), "cwd rules")
	t.Chdir(dir)
	want := builtin.DefaultSystemPrompt + "\n\ncwd rules"
	tests := []struct {
		name  string
		state *bub.State
	}{
		{"blank workspace", bub.NewState(map[string]any{bub.StateWorkspace: "   "})},
		{"no workspace key", bub.NewState(nil)},
		{"no state", nil},
	}
	p := newPlugin(t, builtin.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.SystemPrompt(t.Context(), hooks.SystemPromptInput{State: tt.state})
			if err != nil || got != want {
				t.Errorf("SystemPrompt = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
