package pipeline_test

import (
	"context"
	"testing"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/pipeline"
	"github.com/bubbus/bub/pkg/tape"
)

// workspace is the framework workspace of the tests.
const workspace = "/srv/bub-workspace"

// journal records hook calls as "<plugin>:<hook>" in call order.
type journal struct{ calls []string }

func (j *journal) add(call string) { j.calls = append(j.calls, call) }

// plug is a test plugin: it implements the turn hooks with an optional
// function each and, through hooks.HookSelector, serves only the hooks
// whose function is set. Every call is recorded in the journal first.
type plug struct {
	name string
	j    *journal

	resolveSession   func(hooks.ResolveSessionInput) (string, bool, error)
	loadState        func(hooks.LoadStateInput) (map[string]any, error)
	buildPrompt      func(hooks.BuildPromptInput) (llm.Content, bool, error)
	runModel         func(hooks.RunModelInput) (string, bool, error)
	runModelStream   func(hooks.RunModelInput) (hooks.Stream, bool, error)
	saveState        func(hooks.SaveStateInput) error
	renderOutbound   func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error)
	dispatchOutbound func(hooks.DispatchOutboundInput) (bool, error)
	onError          func(hooks.OnErrorInput) error
}

var (
	_ hooks.HookSelector       = (*plug)(nil)
	_ hooks.SessionResolver    = (*plug)(nil)
	_ hooks.StateLoader        = (*plug)(nil)
	_ hooks.PromptBuilder      = (*plug)(nil)
	_ hooks.ModelRunner        = (*plug)(nil)
	_ hooks.ModelStreamer      = (*plug)(nil)
	_ hooks.StateSaver         = (*plug)(nil)
	_ hooks.OutboundRenderer   = (*plug)(nil)
	_ hooks.OutboundDispatcher = (*plug)(nil)
	_ hooks.ErrorObserver      = (*plug)(nil)
)

func (p *plug) Name() string { return p.name }

func (p *plug) ServesHook(h hooks.Hook) bool {
	switch h {
	case hooks.HookResolveSession:
		return p.resolveSession != nil
	case hooks.HookLoadState:
		return p.loadState != nil
	case hooks.HookBuildPrompt:
		return p.buildPrompt != nil
	case hooks.HookRunModel:
		return p.runModel != nil
	case hooks.HookRunModelStream:
		return p.runModelStream != nil
	case hooks.HookSaveState:
		return p.saveState != nil
	case hooks.HookRenderOutbound:
		return p.renderOutbound != nil
	case hooks.HookDispatchOutbound:
		return p.dispatchOutbound != nil
	case hooks.HookOnError:
		return p.onError != nil
	}
	return false
}

func (p *plug) record(h hooks.Hook) {
	if p.j != nil {
		p.j.add(p.name + ":" + string(h))
	}
}

func (p *plug) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	p.record(hooks.HookResolveSession)
	return p.resolveSession(in)
}

func (p *plug) LoadState(_ context.Context, in hooks.LoadStateInput) (map[string]any, error) {
	p.record(hooks.HookLoadState)
	return p.loadState(in)
}

func (p *plug) BuildPrompt(_ context.Context, in hooks.BuildPromptInput) (llm.Content, bool, error) {
	p.record(hooks.HookBuildPrompt)
	return p.buildPrompt(in)
}

func (p *plug) RunModel(_ context.Context, in hooks.RunModelInput) (string, bool, error) {
	p.record(hooks.HookRunModel)
	return p.runModel(in)
}

func (p *plug) RunModelStream(_ context.Context, in hooks.RunModelInput) (hooks.Stream, bool, error) {
	p.record(hooks.HookRunModelStream)
	return p.runModelStream(in)
}

func (p *plug) SaveState(_ context.Context, in hooks.SaveStateInput) error {
	p.record(hooks.HookSaveState)
	return p.saveState(in)
}

func (p *plug) RenderOutbound(_ context.Context, in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
	p.record(hooks.HookRenderOutbound)
	return p.renderOutbound(in)
}

func (p *plug) DispatchOutbound(_ context.Context, in hooks.DispatchOutboundInput) (bool, error) {
	p.record(hooks.HookDispatchOutbound)
	return p.dispatchOutbound(in)
}

func (p *plug) OnError(_ context.Context, in hooks.OnErrorInput) error {
	p.record(hooks.HookOnError)
	return p.onError(in)
}

// errorLog is an on_error observer plugin that keeps every report.
type errorLog struct{ got []hooks.OnErrorInput }

func (*errorLog) Name() string { return "error-log" }

func (l *errorLog) OnError(_ context.Context, in hooks.OnErrorInput) error {
	l.got = append(l.got, in)
	return nil
}

// newPipeline registers plugins in order (the first has the lowest
// priority) in a real registry, starts it and returns a framework over it.
func newPipeline(t *testing.T, plugins ...hooks.Plugin) *pipeline.Pipeline {
	t.Helper()
	reg := newRegistry(t, plugins...)
	return pipeline.New(reg, workspace, nil)
}

func newRegistry(t *testing.T, plugins ...hooks.Plugin) *hooks.Registry[tape.Store, tape.Context] {
	t.Helper()
	ctx := t.Context()
	reg := hooks.New[tape.Store, tape.Context]()
	for _, p := range plugins {
		if err := reg.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return reg
}

// deltas returns a stream of the given deltas.
func deltas(ds ...llm.Delta) hooks.Stream {
	return func(yield func(llm.Delta, error) bool) {
		for _, d := range ds {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// failingStream yields text and then fails with err.
func failingStream(text string, err error) hooks.Stream {
	return func(yield func(llm.Delta, error) bool) {
		if !yield(llm.Delta{Kind: "text", Text: text}, nil) {
			return
		}
		yield(llm.Delta{}, err)
	}
}

// inbound returns a fresh inbound envelope of the tests.
func inbound() *envelope.Envelope {
	return &envelope.Envelope{ID: "in-1", Content: "hi there", Channel: "telegram", ChatID: "42"}
}
