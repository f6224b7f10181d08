package pipeline_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/pipeline"
)

var (
	errBad  = errors.New("bad")
	errSave = errors.New("save failed")
)

// TestProcessInboundStages runs one successful turn through one plugin
// that implements every turn hook and checks the stage order (docs/ARCHITECTURE.md, step 6) and
// what every stage receives.
func TestProcessInboundStages(t *testing.T) {
	j := &journal{}
	var (
		load     hooks.LoadStateInput
		build    hooks.BuildPromptInput
		run      hooks.RunModelInput
		save     hooks.SaveStateInput
		render   hooks.RenderOutboundInput
		rendered []*envelope.Envelope
		sent     []*envelope.Envelope
	)
	p := &plug{name: "p", j: j,
		resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "s-1", true, nil },
		loadState: func(in hooks.LoadStateInput) (map[string]any, error) {
			load = in
			return map[string]any{"k": "v"}, nil
		},
		buildPrompt: func(in hooks.BuildPromptInput) (llm.Content, bool, error) {
			build = in
			return llm.Text("prompt with " + in.State.String("k")), true, nil
		},
		runModelStream: func(in hooks.RunModelInput) (hooks.Stream, bool, error) {
			run = in
			return deltas(
				llm.Delta{Kind: "text", Text: "an"},
				llm.Delta{Kind: "reasoning", Text: "(thinking)"},
				llm.Delta{Kind: "text", Text: "swer"},
			), true, nil
		},
		saveState: func(in hooks.SaveStateInput) error {
			save = in
			return nil
		},
		renderOutbound: func(in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
			render = in
			rendered = []*envelope.Envelope{{Content: "one"}, {Content: "two"}}
			return rendered, nil
		},
		dispatchOutbound: func(in hooks.DispatchOutboundInput) (bool, error) {
			sent = append(sent, in.Message)
			return true, nil
		},
		onError: func(in hooks.OnErrorInput) error {
			t.Errorf("on_error(%s, %v) in a successful turn", in.Stage, in.Err)
			return nil
		},
	}
	fw := newPipeline(t, p)
	msg := inbound()

	res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})
	if err != nil {
		t.Fatal(err)
	}

	wantCalls := []string{
		"p:resolve_session", "p:load_state", "p:build_prompt", "p:run_model_stream",
		"p:save_state", "p:render_outbound", "p:dispatch_outbound", "p:dispatch_outbound",
	}
	if !slices.Equal(j.calls, wantCalls) {
		t.Errorf("calls = %q, want %q", j.calls, wantCalls)
	}
	if load.Message != msg || load.SessionID != "s-1" {
		t.Errorf("load_state got message %p session %q, want %p s-1", load.Message, load.SessionID, msg)
	}
	if build.Message != msg || build.SessionID != "s-1" || build.State != res.State {
		t.Errorf("build_prompt input = %+v, want the message, s-1 and the turn state", build)
	}
	if want := llm.Text("prompt with v"); !reflect.DeepEqual(run.Prompt, want) || run.SessionID != "s-1" || run.State != res.State {
		t.Errorf("run_model_stream input = %+v, want prompt %q, s-1 and the turn state", run, want.Text)
	}
	if save.SessionID != "s-1" || save.State != res.State || save.Message != msg || save.ModelOutput != "answer" || save.Err != nil {
		t.Errorf("save_state input = %+v, want s-1, the turn state, the message, output \"answer\" and no error", save)
	}
	if render.Message != msg || render.SessionID != "s-1" || render.State != res.State || render.ModelOutput != "answer" {
		t.Errorf("render_outbound input = %+v, want the message, s-1, the turn state and \"answer\"", render)
	}
	if !slices.Equal(sent, rendered) {
		t.Errorf("dispatched %v, want the rendered envelopes %v in order", sent, rendered)
	}
	if res.SessionID != "s-1" || res.ModelOutput != "answer" || !reflect.DeepEqual(res.Prompt, llm.Text("prompt with v")) || !slices.Equal(res.Outbounds, rendered) {
		t.Errorf("result = %+v", res)
	}
	wantState := map[string]any{bub.StateWorkspace: workspace, "k": "v"}
	if got := res.State.Snapshot(); !reflect.DeepEqual(got, wantState) {
		t.Errorf("state = %v, want %v", got, wantState)
	}
}

// TestProcessInboundResolvedSession: a turn whose caller resolved the
// session already (the worker's admission gate) does not call
// resolve_session again; every stage and the message get that session,
// and the model stage gets the turn's delivery.
func TestProcessInboundResolvedSession(t *testing.T) {
	j := &journal{}
	var run hooks.RunModelInput
	var loaded string
	p := &plug{name: "p", j: j,
		resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "other", true, nil },
		loadState: func(in hooks.LoadStateInput) (map[string]any, error) {
			loaded = in.SessionID
			return nil, nil
		},
		runModel: func(in hooks.RunModelInput) (string, bool, error) {
			run = in
			return "ok", true, nil
		},
	}
	fw := newPipeline(t, p)
	steer := &drained{}
	in := pipeline.Turn{Inbound: hooks.Inbound{Message: inbound(), StreamSeq: 7, Delivery: 2, Steering: steer}, SessionID: "routed"}

	res, err := fw.ProcessInbound(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(j.calls, "p:resolve_session") {
		t.Errorf("calls = %q: resolve_session ran for a resolved session", j.calls)
	}
	if res.SessionID != "routed" || loaded != "routed" || in.Message.SessionID != "routed" || run.SessionID != "routed" {
		t.Errorf("session: result %q, load_state %q, message %q, run_model %q; want routed everywhere", res.SessionID, loaded, in.Message.SessionID, run.SessionID)
	}
	if d := run.Inbound; d == nil || d.Message != in.Message || d.StreamSeq != 7 || d.Delivery != 2 || d.Steering != steer {
		t.Errorf("run_model inbound = %+v, want the message, stream seq 7, delivery 2 and the steering inbox", d)
	}
}

// drained is a steering inbox that never has messages.
type drained struct{}

func (*drained) Drain(context.Context) ([]*envelope.Envelope, error) { return nil, nil }

// TestProcessInboundLoadStateMerge: load_state results are merged over the
// framework's seed (_runtime_workspace) so that the higher-priority
// plugin's keys win; every plugin runs, highest priority first.
func TestProcessInboundLoadStateMerge(t *testing.T) {
	j := &journal{}
	low := &plug{name: "low", j: j, loadState: func(hooks.LoadStateInput) (map[string]any, error) {
		return map[string]any{"k": "low", "only_low": 1}, nil
	}}
	none := &plug{name: "none", j: j, loadState: func(hooks.LoadStateInput) (map[string]any, error) {
		return nil, nil
	}}
	high := &plug{name: "high", j: j, loadState: func(hooks.LoadStateInput) (map[string]any, error) {
		return map[string]any{"k": "high", "only_high": 2}, nil
	}}
	var prompted *bub.State
	model := &plug{name: "model", runModel: func(in hooks.RunModelInput) (string, bool, error) {
		prompted = in.State
		return "ok", true, nil
	}}
	fw := newPipeline(t, low, none, high, model)

	res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: inbound()}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"high:load_state", "none:load_state", "low:load_state"}; !slices.Equal(j.calls, want) {
		t.Errorf("load_state order = %q, want %q", j.calls, want)
	}
	want := map[string]any{bub.StateWorkspace: workspace, "k": "high", "only_low": 1, "only_high": 2}
	if got := res.State.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("state = %v, want %v", got, want)
	}
	if prompted != res.State {
		t.Error("the model stage did not get the turn state")
	}
}

// TestProcessInboundBuildPrompt: the first build_prompt answer wins; no
// answer, or an empty selected answer, falls back to the message content
// without trying lower plugins.
func TestProcessInboundBuildPrompt(t *testing.T) {
	parts := llm.Content{Parts: []llm.Part{{Type: "text", Text: "with parts"}}}
	answer := func(c llm.Content, ok bool) func(hooks.BuildPromptInput) (llm.Content, bool, error) {
		return func(hooks.BuildPromptInput) (llm.Content, bool, error) { return c, ok, nil }
	}
	tests := []struct {
		name      string
		low, high func(hooks.BuildPromptInput) (llm.Content, bool, error)
		want      llm.Content
		wantCalls []string
	}{
		{"no implementation", nil, nil, llm.Text("hi there"), nil},
		{"high answers", answer(llm.Text("low"), true), answer(llm.Text("high"), true), llm.Text("high"), []string{"high:build_prompt"}},
		{"high has no opinion", answer(llm.Text("low"), true), answer(llm.Text("ignored"), false), llm.Text("low"), []string{"high:build_prompt", "low:build_prompt"}},
		{"empty text answer falls back to content, not to low", answer(llm.Text("low"), true), answer(llm.Text(""), true), llm.Text("hi there"), []string{"high:build_prompt"}},
		{"empty parts answer falls back to content", nil, answer(llm.Content{Parts: []llm.Part{}}, true), llm.Text("hi there"), []string{"high:build_prompt"}},
		{"parts answer", nil, answer(parts, true), parts, []string{"high:build_prompt"}},
		{"nobody answers", answer(llm.Content{}, false), answer(llm.Content{}, false), llm.Text("hi there"), []string{"high:build_prompt", "low:build_prompt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			var got llm.Content
			model := &plug{name: "model", runModel: func(in hooks.RunModelInput) (string, bool, error) {
				got = in.Prompt
				return "ok", true, nil
			}}
			fw := newPipeline(t, model,
				&plug{name: "low", j: j, buildPrompt: tt.low},
				&plug{name: "high", j: j, buildPrompt: tt.high})
			res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: inbound()}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) || !reflect.DeepEqual(res.Prompt, tt.want) {
				t.Errorf("model prompt = %+v, result prompt = %+v, want %+v", got, res.Prompt, tt.want)
			}
			if !slices.Equal(j.calls, tt.wantCalls) {
				t.Errorf("calls = %q, want %q", j.calls, tt.wantCalls)
			}
		})
	}
}

// TestProcessInboundModelStage pins the model stage: save_state runs after
// it whether it succeeded or failed, sees the output or the failure, and a
// save_state error replaces the model's; a failed stage ends the turn
// before render_outbound with one on_error(stage "turn").
func TestProcessInboundModelStage(t *testing.T) {
	errProvider := bub.Errorf(bub.KindProvider, "down")
	tests := []struct {
		name       string
		model      func(hooks.RunModelInput) (hooks.Stream, bool, error)
		saveErr    error
		wantOutput string // the result's and save_state's model output
		wantSave   error  // save_state's Err
		wantErr    error  // nil: the turn succeeds
		notErr     error  // an error the turn's error must not match
	}{
		{
			name:       "stream succeeds",
			model:      func(hooks.RunModelInput) (hooks.Stream, bool, error) { return hooks.TextStream("out"), true, nil },
			wantOutput: "out",
		},
		{
			name:       "empty answer is an answer",
			model:      func(hooks.RunModelInput) (hooks.Stream, bool, error) { return deltas(), true, nil },
			wantOutput: "",
		},
		{
			name:     "model call fails",
			model:    func(hooks.RunModelInput) (hooks.Stream, bool, error) { return nil, false, errBad },
			wantSave: errBad,
			wantErr:  errBad,
		},
		{
			name: "stream fails midway: partial output is dropped",
			model: func(hooks.RunModelInput) (hooks.Stream, bool, error) {
				return failingStream("partial", errProvider), true, nil
			},
			wantSave: errProvider,
			wantErr:  errProvider,
		},
		{
			name:       "save_state fails after the model succeeded",
			model:      func(hooks.RunModelInput) (hooks.Stream, bool, error) { return hooks.TextStream("out"), true, nil },
			saveErr:    errSave,
			wantOutput: "out",
			wantErr:    errSave,
		},
		{
			name:     "save_state error replaces the model error",
			model:    func(hooks.RunModelInput) (hooks.Stream, bool, error) { return nil, false, errBad },
			saveErr:  errSave,
			wantSave: errBad,
			wantErr:  errSave,
			notErr:   errBad,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			var saves []hooks.SaveStateInput
			errs := &errorLog{}
			p := &plug{name: "p", j: j,
				runModelStream: tt.model,
				saveState: func(in hooks.SaveStateInput) error {
					saves = append(saves, in)
					return tt.saveErr
				},
				renderOutbound:   func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error) { return nil, nil },
				dispatchOutbound: func(hooks.DispatchOutboundInput) (bool, error) { return true, nil },
			}
			fw := newPipeline(t, errs, p)
			msg := inbound()

			res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})

			if len(saves) != 1 {
				t.Fatalf("save_state ran %d times, want once", len(saves))
			}
			if s := saves[0]; s.ModelOutput != tt.wantOutput || !errors.Is(s.Err, tt.wantSave) || (tt.wantSave == nil) != (s.Err == nil) {
				t.Errorf("save_state saw output %q err %v, want %q and %v", s.ModelOutput, s.Err, tt.wantOutput, tt.wantSave)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("turn failed: %v", err)
				}
				if res.ModelOutput != tt.wantOutput {
					t.Errorf("model output = %q, want %q", res.ModelOutput, tt.wantOutput)
				}
				want := []string{"p:run_model_stream", "p:save_state", "p:render_outbound", "p:dispatch_outbound"}
				if !slices.Equal(j.calls, want) {
					t.Errorf("calls = %q, want %q", j.calls, want)
				}
				if len(errs.got) != 0 {
					t.Errorf("on_error called: %+v", errs.got)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("turn error = %v, want %v", err, tt.wantErr)
			}
			if tt.notErr != nil && errors.Is(err, tt.notErr) {
				t.Errorf("turn error %v still carries %v", err, tt.notErr)
			}
			if want := []string{"p:run_model_stream", "p:save_state"}; !slices.Equal(j.calls, want) {
				t.Errorf("calls = %q, want %q (no outbound after a failed model stage)", j.calls, want)
			}
			if len(errs.got) != 1 || errs.got[0].Stage != "turn" || errs.got[0].Err != err || errs.got[0].Message != msg {
				t.Errorf("on_error calls = %+v, want one (turn, %v, the message)", errs.got, err)
			}
		})
	}
}

// TestProcessInboundFailures: any failing stage ends the turn with its
// error, reported exactly once to on_error with stage "turn" and the
// message; save_state runs only once the model stage started.
func TestProcessInboundFailures(t *testing.T) {
	fail := errBad
	tests := []struct {
		name      string
		set       func(p *plug)
		wantCalls []string
	}{
		{"resolve_session", func(p *plug) {
			p.resolveSession = func(hooks.ResolveSessionInput) (string, bool, error) { return "", false, fail }
		}, []string{"p:resolve_session"}},
		{"load_state", func(p *plug) {
			p.loadState = func(hooks.LoadStateInput) (map[string]any, error) { return nil, fail }
		}, []string{"p:resolve_session", "p:load_state"}},
		{"build_prompt", func(p *plug) {
			p.buildPrompt = func(hooks.BuildPromptInput) (llm.Content, bool, error) { return llm.Content{}, false, fail }
		}, []string{"p:resolve_session", "p:load_state", "p:build_prompt"}},
		{"render_outbound", func(p *plug) {
			p.renderOutbound = func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error) { return nil, fail }
		}, []string{"p:resolve_session", "p:load_state", "p:build_prompt", "p:run_model_stream", "p:save_state", "p:render_outbound"}},
		{"second dispatch_outbound", func(p *plug) {
			n := 0
			p.dispatchOutbound = func(hooks.DispatchOutboundInput) (bool, error) {
				if n++; n == 2 {
					return false, fail
				}
				return true, nil
			}
		}, []string{"p:resolve_session", "p:load_state", "p:build_prompt", "p:run_model_stream", "p:save_state", "p:render_outbound", "p:dispatch_outbound", "p:dispatch_outbound"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			p := &plug{name: "p", j: j,
				resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "s-1", true, nil },
				loadState:      func(hooks.LoadStateInput) (map[string]any, error) { return nil, nil },
				buildPrompt:    func(hooks.BuildPromptInput) (llm.Content, bool, error) { return llm.Text("p"), true, nil },
				runModelStream: func(hooks.RunModelInput) (hooks.Stream, bool, error) { return hooks.TextStream("out"), true, nil },
				saveState:      func(hooks.SaveStateInput) error { return nil },
				renderOutbound: func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
					return []*envelope.Envelope{{Content: "a"}, {Content: "b"}, {Content: "c"}}, nil
				},
				dispatchOutbound: func(hooks.DispatchOutboundInput) (bool, error) { return true, nil },
			}
			tt.set(p)
			errs := &errorLog{}
			fw := newPipeline(t, errs, p)
			msg := inbound()

			_, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})

			if !errors.Is(err, fail) {
				t.Fatalf("turn error = %v, want %v", err, fail)
			}
			if !slices.Equal(j.calls, tt.wantCalls) {
				t.Errorf("calls = %q, want %q", j.calls, tt.wantCalls)
			}
			if len(errs.got) != 1 {
				t.Fatalf("on_error ran %d times (%+v), want once", len(errs.got), errs.got)
			}
			if got := errs.got[0]; got.Stage != "turn" || got.Err != err || got.Message != msg {
				t.Errorf("on_error got (%q, %v, %p), want (turn, %v, %p)", got.Stage, got.Err, got.Message, err, msg)
			}
		})
	}
}

// TestProcessInboundWithoutModel: with no model hook at all, on_error
// hears stage run_model, the model output is the prompt text (or the
// content for a part list), the turn goes on, and the framework's echo
// envelope answers when nobody renders.
func TestProcessInboundWithoutModel(t *testing.T) {
	tests := []struct {
		name   string
		prompt llm.Content
		want   string
	}{
		{"text prompt", llm.Text("the prompt"), "the prompt"},
		{"part list prompt", llm.Content{Parts: []llm.Part{{Type: "text", Text: "part"}}}, "hi there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var saved []string
			var sent []*envelope.Envelope
			errs := &errorLog{}
			p := &plug{name: "p",
				buildPrompt: func(hooks.BuildPromptInput) (llm.Content, bool, error) { return tt.prompt, true, nil },
				saveState: func(in hooks.SaveStateInput) error {
					saved = append(saved, in.ModelOutput)
					if in.Err != nil {
						t.Errorf("save_state saw error %v", in.Err)
					}
					return nil
				},
				dispatchOutbound: func(in hooks.DispatchOutboundInput) (bool, error) {
					sent = append(sent, in.Message)
					return true, nil
				},
			}
			fw := newPipeline(t, errs, p)
			msg := inbound()

			res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})
			if err != nil {
				t.Fatal(err)
			}
			if len(errs.got) != 1 || errs.got[0].Stage != "run_model" || !errors.Is(errs.got[0].Err, pipeline.ErrNoModelOutput) || errs.got[0].Message != msg {
				t.Errorf("on_error calls = %+v, want one (run_model, ErrNoModelOutput, the message)", errs.got)
			}
			if res.ModelOutput != tt.want || !slices.Equal(saved, []string{tt.want}) {
				t.Errorf("model output %q, saved %q, want %q", res.ModelOutput, saved, tt.want)
			}
			want := []*envelope.Envelope{{
				ID: "in-1/0", Content: tt.want, SessionID: "telegram:42", Channel: "telegram", ChatID: "42",
				InReplyTo: "in-1", BatchIndex: 0, BatchSize: 1,
			}}
			if !reflect.DeepEqual(res.Outbounds, want) || !reflect.DeepEqual(sent, want) {
				t.Errorf("outbounds = %+v, dispatched %+v, want the echo %+v", res.Outbounds, sent, want[0])
			}
		})
	}
}

// TestProcessInboundRunModelOnly is behaviour check 19: a non-streaming
// run_model answer reaches save_state and the result.
func TestProcessInboundRunModelOnly(t *testing.T) {
	var saved string
	p := &plug{name: "p",
		runModel: func(hooks.RunModelInput) (string, bool, error) { return "plain-text", true, nil },
		saveState: func(in hooks.SaveStateInput) error {
			saved = in.ModelOutput
			return nil
		},
	}
	fw := newPipeline(t, p)
	res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: inbound()}})
	if err != nil {
		t.Fatal(err)
	}
	if saved != "plain-text" || res.ModelOutput != "plain-text" {
		t.Errorf("save_state saw %q, result carries %q, want plain-text for both", saved, res.ModelOutput)
	}
}

// TestProcessInboundAddressesOutbounds: every outbound gets its id
// "<inbound id>/<index>" unless a plugin set one, the inbound id it answers,
// its place in the batch and the resolved session when it has none, and
// is dispatched in order.
func TestProcessInboundAddressesOutbounds(t *testing.T) {
	var sent []string
	render := func(batch ...*envelope.Envelope) func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
		return func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error) { return batch, nil }
	}
	low := &plug{name: "low", renderOutbound: render(&envelope.Envelope{Content: "c", InReplyTo: "stale"})}
	high := &plug{name: "high",
		resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "resolved", true, nil },
		runModel:       func(hooks.RunModelInput) (string, bool, error) { return "out", true, nil },
		renderOutbound: render(
			&envelope.Envelope{Content: "a"},
			nil,
			&envelope.Envelope{ID: "plugin-id", Content: "b", SessionID: "other"},
		),
		dispatchOutbound: func(in hooks.DispatchOutboundInput) (bool, error) {
			sent = append(sent, in.Message.ID)
			return true, nil
		},
	}
	fw := newPipeline(t, low, high)
	msg := &envelope.Envelope{ID: "in-7", Content: "x", Channel: "cli", ChatID: "c1"}

	res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*envelope.Envelope{
		{ID: "in-7/0", Content: "a", SessionID: "resolved", InReplyTo: "in-7", BatchIndex: 0, BatchSize: 3},
		{ID: "plugin-id", Content: "b", SessionID: "other", InReplyTo: "in-7", BatchIndex: 1, BatchSize: 3},
		{ID: "in-7/2", Content: "c", SessionID: "resolved", InReplyTo: "in-7", BatchIndex: 2, BatchSize: 3},
	}
	if !reflect.DeepEqual(res.Outbounds, want) {
		for i, o := range res.Outbounds {
			t.Logf("outbound %d: %+v", i, *o)
		}
		t.Errorf("outbounds differ from %+v", want)
	}
	if wantIDs := []string{"in-7/0", "plugin-id", "in-7/2"}; !slices.Equal(sent, wantIDs) {
		t.Errorf("dispatched %q, want %q", sent, wantIDs)
	}
}

// TestProcessInboundSessionOfInbound: like a mapping inbound in Bub, an
// inbound without a session id gains the resolved one (so on_error and the
// later stages see it); one that has a session id keeps it.
func TestProcessInboundSessionOfInbound(t *testing.T) {
	tests := []struct {
		name, session, resolved, want string
	}{
		{"absent", "", "resolved", "resolved"},
		{"present", "given", "resolved", "given"},
		{"blank is present", "   ", "telegram:42", "   "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen string
			p := &plug{name: "p",
				resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return tt.resolved, true, nil },
				buildPrompt: func(in hooks.BuildPromptInput) (llm.Content, bool, error) {
					seen = in.Message.SessionID
					return llm.Content{}, false, nil
				},
				runModel: func(hooks.RunModelInput) (string, bool, error) { return "ok", true, nil },
			}
			fw := newPipeline(t, p)
			msg := inbound()
			msg.SessionID = tt.session
			res, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}})
			if err != nil {
				t.Fatal(err)
			}
			if seen != tt.want || msg.SessionID != tt.want {
				t.Errorf("build_prompt saw session %q, inbound has %q, want %q", seen, msg.SessionID, tt.want)
			}
			if res.SessionID != tt.resolved || res.Outbounds[0].SessionID != tt.resolved {
				t.Errorf("result session %q, outbound session %q, want %q", res.SessionID, res.Outbounds[0].SessionID, tt.resolved)
			}
		})
	}
}

// TestProcessInboundNormalizes: the inbound is normalized before any hook
// sees it (Bub's ChannelMessage construction rules).
func TestProcessInboundNormalizes(t *testing.T) {
	tests := []struct {
		name    string
		context *envelope.Context
		wantCtx string
	}{
		{"no context", nil, "channel=$telegram|chat_id=42"},
		{"user keys first", envelope.NewContext("sender_id", "u1"), "sender_id=u1|channel=$telegram|chat_id=42"},
		{"channel overwritten in place", envelope.NewContext("channel", "spoofed", "a", "b"), "channel=$telegram|a=b|chat_id=42"},
		{"runtime keys hidden", envelope.NewContext("_secret", "x", "model", "m"), "model=m|channel=$telegram|chat_id=42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen *envelope.Envelope
			var seenCtx string
			p := &plug{name: "p",
				resolveSession: func(in hooks.ResolveSessionInput) (string, bool, error) {
					seen, seenCtx = in.Message, in.Message.ContextStr()
					return "", false, nil
				},
				runModel: func(hooks.RunModelInput) (string, bool, error) { return "ok", true, nil },
			}
			fw := newPipeline(t, p)
			msg := inbound()
			msg.Context = tt.context
			if _, err := fw.ProcessInbound(t.Context(), pipeline.Turn{Inbound: hooks.Inbound{Message: msg}}); err != nil {
				t.Fatal(err)
			}
			if seen != msg || seenCtx != tt.wantCtx {
				t.Errorf("resolve_session saw context %q, want %q", seenCtx, tt.wantCtx)
			}
			if msg.OutputChannel != "telegram" || msg.Kind != envelope.KindNormal {
				t.Errorf("output channel %q kind %q, want telegram and normal", msg.OutputChannel, msg.Kind)
			}
		})
	}
}

func TestAddress(t *testing.T) {
	in := &envelope.Envelope{ID: "in-3", SessionID: "s"}
	tests := []struct {
		name        string
		out         envelope.Envelope
		index, size int
		want        envelope.Envelope
	}{
		{"fresh", envelope.Envelope{Content: "x"}, 0, 1,
			envelope.Envelope{ID: "in-3/0", Content: "x", InReplyTo: "in-3", BatchIndex: 0, BatchSize: 1}},
		{"plugin id kept, reply target and place set", envelope.Envelope{ID: "mine", InReplyTo: "old", BatchIndex: 9, BatchSize: 9}, 2, 4,
			envelope.Envelope{ID: "mine", InReplyTo: "in-3", BatchIndex: 2, BatchSize: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.out
			pipeline.Address(&out, in, tt.index, tt.size)
			if !reflect.DeepEqual(out, tt.want) {
				t.Errorf("Address = %+v, want %+v", out, tt.want)
			}
		})
	}
}
