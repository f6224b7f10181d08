package hooks_test

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// registry is the registry type of the tests.
type registry = hooks.Registry[*memStore, tapeCtx]

// memStore is the tape store type of the tests' registries.
type memStore struct {
	name   string
	closed int
}

func (s *memStore) Close(context.Context) error {
	s.closed++
	return nil
}

// tapeCtx is the tape context type of the tests' registries.
type tapeCtx struct{ anchor string }

// fake implements every hook with an optional function per hook; through
// hooks.HookSelector it serves only the hooks whose function is set.
type fake struct {
	name             string
	resolveSession   func(hooks.ResolveSessionInput) (string, bool, error)
	loadState        func(hooks.LoadStateInput) (map[string]any, error)
	buildPrompt      func(hooks.BuildPromptInput) (llm.Content, bool, error)
	runModel         func(hooks.RunModelInput) (string, bool, error)
	runModelStream   func(hooks.RunModelInput) (hooks.Stream, bool, error)
	saveState        func(hooks.SaveStateInput) error
	renderOutbound   func(hooks.RenderOutboundInput) ([]*envelope.Envelope, error)
	dispatchOutbound func(hooks.DispatchOutboundInput) (bool, error)
	registerCLI      func(hooks.RegisterCLICommandsInput) error
	onboardConfig    func(hooks.OnboardConfigInput) (map[string]any, error)
	runtimeOptions   func(hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error)
	onError          func(hooks.OnErrorInput) error
	systemPrompt     func(hooks.SystemPromptInput) (string, error)
	tapeStore        func() (*memStore, bool, error)
	channels         func(hooks.ProvideChannelsInput) ([]hooks.Channel, error)
	tapeContext      func() (tapeCtx, bool, error)
	admitMessage     func(hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error)
	beforeLLM        func(hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error)
	afterLLM         func(hooks.AfterLLMCallInput) error
	beforeTool       func(hooks.BeforeToolCallInput) (*tools.Decision, error)
	afterTool        func(hooks.AfterToolCallInput) error
	continuePrompt   func(hooks.ContinuePromptInput) (string, bool, error)
	steeringInbox    func() (hooks.SteeringInbox, bool, error)
}

func (f *fake) Name() string { return f.name }

func (f *fake) ServesHook(h hooks.Hook) bool {
	fn := map[hooks.Hook]any{
		hooks.HookResolveSession:        f.resolveSession,
		hooks.HookLoadState:             f.loadState,
		hooks.HookBuildPrompt:           f.buildPrompt,
		hooks.HookRunModel:              f.runModel,
		hooks.HookRunModelStream:        f.runModelStream,
		hooks.HookSaveState:             f.saveState,
		hooks.HookRenderOutbound:        f.renderOutbound,
		hooks.HookDispatchOutbound:      f.dispatchOutbound,
		hooks.HookRegisterCLICommands:   f.registerCLI,
		hooks.HookOnboardConfig:         f.onboardConfig,
		hooks.HookProvideRuntimeOptions: f.runtimeOptions,
		hooks.HookOnError:               f.onError,
		hooks.HookSystemPrompt:          f.systemPrompt,
		hooks.HookProvideTapeStore:      f.tapeStore,
		hooks.HookProvideChannels:       f.channels,
		hooks.HookBuildTapeContext:      f.tapeContext,
		hooks.HookAdmitMessage:          f.admitMessage,
		hooks.HookBeforeLLMCall:         f.beforeLLM,
		hooks.HookAfterLLMCall:          f.afterLLM,
		hooks.HookBeforeToolCall:        f.beforeTool,
		hooks.HookAfterToolCall:         f.afterTool,
		hooks.HookContinuePrompt:        f.continuePrompt,
		hooks.HookProvideSteeringInbox:  f.steeringInbox,
	}[h]
	return fn != nil && !reflect.ValueOf(fn).IsNil()
}

func (f *fake) ResolveSession(_ context.Context, in hooks.ResolveSessionInput) (string, bool, error) {
	return f.resolveSession(in)
}

func (f *fake) LoadState(_ context.Context, in hooks.LoadStateInput) (map[string]any, error) {
	return f.loadState(in)
}

func (f *fake) BuildPrompt(_ context.Context, in hooks.BuildPromptInput) (llm.Content, bool, error) {
	return f.buildPrompt(in)
}

func (f *fake) RunModel(_ context.Context, in hooks.RunModelInput) (string, bool, error) {
	return f.runModel(in)
}

func (f *fake) RunModelStream(_ context.Context, in hooks.RunModelInput) (hooks.Stream, bool, error) {
	return f.runModelStream(in)
}

func (f *fake) SaveState(_ context.Context, in hooks.SaveStateInput) error { return f.saveState(in) }

func (f *fake) RenderOutbound(_ context.Context, in hooks.RenderOutboundInput) ([]*envelope.Envelope, error) {
	return f.renderOutbound(in)
}

func (f *fake) DispatchOutbound(_ context.Context, in hooks.DispatchOutboundInput) (bool, error) {
	return f.dispatchOutbound(in)
}

func (f *fake) RegisterCLICommands(_ context.Context, in hooks.RegisterCLICommandsInput) error {
	return f.registerCLI(in)
}

func (f *fake) OnboardConfig(_ context.Context, in hooks.OnboardConfigInput) (map[string]any, error) {
	return f.onboardConfig(in)
}

func (f *fake) ProvideRuntimeOptions(_ context.Context, in hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
	return f.runtimeOptions(in)
}

func (f *fake) OnError(_ context.Context, in hooks.OnErrorInput) error { return f.onError(in) }

func (f *fake) SystemPrompt(_ context.Context, in hooks.SystemPromptInput) (string, error) {
	return f.systemPrompt(in)
}

func (f *fake) ProvideTapeStore(context.Context, hooks.ProvideTapeStoreInput) (*memStore, bool, error) {
	return f.tapeStore()
}

func (f *fake) ProvideChannels(_ context.Context, in hooks.ProvideChannelsInput) ([]hooks.Channel, error) {
	return f.channels(in)
}

func (f *fake) BuildTapeContext(context.Context, hooks.BuildTapeContextInput) (tapeCtx, bool, error) {
	return f.tapeContext()
}

func (f *fake) AdmitMessage(_ context.Context, in hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
	return f.admitMessage(in)
}

func (f *fake) BeforeLLMCall(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	return f.beforeLLM(in)
}

func (f *fake) AfterLLMCall(_ context.Context, in hooks.AfterLLMCallInput) error {
	return f.afterLLM(in)
}

func (f *fake) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return f.beforeTool(in)
}

func (f *fake) AfterToolCall(_ context.Context, in hooks.AfterToolCallInput) error {
	return f.afterTool(in)
}

func (f *fake) ContinuePrompt(_ context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
	return f.continuePrompt(in)
}

func (f *fake) ProvideSteeringInbox(context.Context, hooks.ProvideSteeringInboxInput) (hooks.SteeringInbox, bool, error) {
	return f.steeringInbox()
}

// newRegistry registers ps in order (the last has the highest priority).
func newRegistry(t testing.TB, opts []hooks.Option, ps ...hooks.Plugin) *registry {
	t.Helper()
	r := hooks.New[*memStore, tapeCtx](opts...)
	for _, p := range ps {
		if err := r.Register(p); err != nil {
			t.Fatalf("registering %q: %v", p.Name(), err)
		}
	}
	return r
}

// journal records calls in order; plugins may run concurrently.
type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.calls...)
}

// logBuffer returns a logger option writing text records to the buffer.
func logBuffer() ([]hooks.Option, *proctest.Buffer) {
	var b proctest.Buffer
	return []hooks.Option{hooks.WithLogger(slog.New(slog.NewTextHandler(&b, nil)))}, &b
}

func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func msg() *envelope.Envelope {
	return &envelope.Envelope{ID: "in-1", Content: "hello", Channel: "telegram", ChatID: "42"}
}

// named is a minimal plugin implementing no hook.
type named string

func (n named) Name() string { return string(n) }
