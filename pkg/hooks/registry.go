package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// Registry holds the registered plugins in registration order and
// dispatches hooks to them (see dispatch.go). S is the tape store type of
// provide_tape_store and C the tape context type of build_tape_context;
// every other hook has a concrete type.
//
// Registration and lifecycle are serialised; dispatch is lock-free and
// allocation-free for the common hooks, and safe for concurrent use.
type Registry[S, C any] struct {
	logger  *slog.Logger
	observe func(context.Context, DecisionRecord)

	// tab is the immutable dispatch table of the registered plugins;
	// Register swaps in a new one.
	tab atomic.Pointer[table[S, C]]
	// scope is the open runtime scope, nil outside one.
	scope atomic.Pointer[Scope[S]]

	// mu serialises Register, Start and Close and guards the fields below.
	mu      sync.Mutex
	plugins []Plugin // registration order
	frozen  bool
	started int // plugins[:started] were started; Close closes them
}

// Option configures a [Registry].
type Option func(*config)

type config struct {
	logger  *slog.Logger
	observe func(context.Context, DecisionRecord)
}

// WithLogger sets the logger for isolated hook failures; nil discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithDecisionObserver installs f, which receives a [DecisionRecord] for
// every before_llm_call or before_tool_call implementation that changed,
// stopped or failed a call. f runs synchronously inside the dispatch, so it
// must be quick (publish asynchronously).
func WithDecisionObserver(f func(context.Context, DecisionRecord)) Option {
	return func(c *config) { c.observe = f }
}

// New returns an empty registry. Register the builtin plugin first, then
// the other plugins in configured order.
func New[S, C any](opts ...Option) *Registry[S, C] {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	r := &Registry[S, C]{logger: c.logger, observe: c.observe}
	r.tab.Store(newTable[S, C](nil))
	return r
}

// Register adds p with a higher priority than every plugin registered
// before it. It fails on a nil or unnamed plugin, a duplicate name, and
// after Start or Close.
func (r *Registry[S, C]) Register(p Plugin) error {
	if p == nil || p.Name() == "" {
		return fmt.Errorf("registering plugin: %w", ErrInvalidPlugin)
	}
	name := p.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return fmt.Errorf("registering plugin %q: %w", name, ErrFrozen)
	}
	if slices.ContainsFunc(r.plugins, func(q Plugin) bool { return q.Name() == name }) {
		return fmt.Errorf("registering plugin %q: %w", name, ErrDuplicatePlugin)
	}
	r.plugins = append(r.plugins, p)
	r.tab.Store(newTable[S, C](slices.Clone(r.plugins)))
	return nil
}

// MustRegister is Register for static wiring: it panics on error.
func (r *Registry[S, C]) MustRegister(p Plugin) {
	if err := r.Register(p); err != nil {
		panic(err)
	}
}

// Start freezes the registry and starts every plugin that implements
// [Starter], in registration order, then rebuilds the dispatch tables, so
// a [HookSelector] answers with what its plugin learned while starting
// (a remote interceptor discovers the hooks its service serves). When one
// fails, the plugins already started are closed in reverse order and the
// errors are returned.
func (r *Registry[S, C]) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return fmt.Errorf("starting: %w", ErrFrozen)
	}
	r.frozen = true
	for i, p := range r.plugins {
		if s, ok := As[Starter](p); ok {
			if err := guardLifecycle(ctx, s.Start); err != nil {
				err = fmt.Errorf("starting plugin %q: %w", p.Name(), err)
				return errors.Join(err, r.closeStarted(ctx))
			}
		}
		r.started = i + 1
	}
	r.tab.Store(newTable[S, C](slices.Clone(r.plugins)))
	return nil
}

// Close freezes the registry and closes every started plugin that
// implements [Closer], in reverse registration order, returning all
// failures. Closing again does nothing. Close any open [Scope] first.
func (r *Registry[S, C]) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
	return r.closeStarted(ctx)
}

// closeStarted closes plugins[:started] in reverse order; r.mu is held.
func (r *Registry[S, C]) closeStarted(ctx context.Context) error {
	var errs []error
	for i := r.started - 1; i >= 0; i-- {
		p := r.plugins[i]
		if c, ok := As[Closer](p); ok {
			if err := guardLifecycle(ctx, c.Close); err != nil {
				errs = append(errs, fmt.Errorf("closing plugin %q: %w", p.Name(), err))
			}
		}
	}
	r.started = 0
	return errors.Join(errs...)
}

// guardLifecycle calls a Start or Close method, recovering a panic.
func guardLifecycle(ctx context.Context, f func(context.Context) error) (err error) {
	defer recoverTo(&err)
	return f(ctx)
}

// impl is one plugin's implementation of a hook.
type impl[T any] struct {
	plugin string
	// rank is the plugin's position in priority order, 0 = highest.
	rank int
	hook T
}

// table holds, per hook, the implementations in priority order. It is
// built once per registration and never modified, so dispatch reads it
// without locks or allocations.
type table[S, C any] struct {
	plugins []Plugin          // registration order
	names   map[Hook][]string // implementing plugins per hook, priority order

	resolveSession      []impl[SessionResolver]
	loadState           []impl[StateLoader]
	buildPrompt         []impl[PromptBuilder]
	runModel            []impl[ModelRunner]
	runModelStream      []impl[ModelStreamer]
	saveState           []impl[StateSaver]
	renderOutbound      []impl[OutboundRenderer]
	dispatchOutbound    []impl[OutboundDispatcher]
	registerCLICommands []impl[CLICommandRegistrar]
	onboardConfig       []impl[ConfigOnboarder]
	runtimeOptions      []impl[RuntimeOptionsProvider]
	onError             []impl[ErrorObserver]
	systemPrompt        []impl[SystemPrompter]
	tapeStore           []impl[TapeStoreProvider[S]]
	channels            []impl[ChannelProvider]
	tapeContext         []impl[TapeContextBuilder[C]]
	admitMessage        []impl[MessageAdmitter]
	beforeLLMCall       []impl[LLMCallInterceptor]
	afterLLMCall        []impl[LLMCallObserver]
	beforeToolCall      []impl[ToolCallInterceptor]
	afterToolCall       []impl[ToolCallObserver]
	continuePrompt      []impl[PromptContinuer]
	steeringInbox       []impl[SteeringInboxProvider]
}

// newTable detects the hooks of every plugin, in priority order.
func newTable[S, C any](plugins []Plugin) *table[S, C] {
	t := &table[S, C]{plugins: plugins, names: map[Hook][]string{}}
	for rank := range plugins {
		p := plugins[len(plugins)-1-rank]
		add(t, &t.resolveSession, p, rank, HookResolveSession)
		add(t, &t.loadState, p, rank, HookLoadState)
		add(t, &t.buildPrompt, p, rank, HookBuildPrompt)
		add(t, &t.runModel, p, rank, HookRunModel)
		add(t, &t.runModelStream, p, rank, HookRunModelStream)
		add(t, &t.saveState, p, rank, HookSaveState)
		add(t, &t.renderOutbound, p, rank, HookRenderOutbound)
		add(t, &t.dispatchOutbound, p, rank, HookDispatchOutbound)
		add(t, &t.registerCLICommands, p, rank, HookRegisterCLICommands)
		add(t, &t.onboardConfig, p, rank, HookOnboardConfig)
		add(t, &t.runtimeOptions, p, rank, HookProvideRuntimeOptions)
		add(t, &t.onError, p, rank, HookOnError)
		add(t, &t.systemPrompt, p, rank, HookSystemPrompt)
		add(t, &t.tapeStore, p, rank, HookProvideTapeStore)
		add(t, &t.channels, p, rank, HookProvideChannels)
		add(t, &t.tapeContext, p, rank, HookBuildTapeContext)
		add(t, &t.admitMessage, p, rank, HookAdmitMessage)
		add(t, &t.beforeLLMCall, p, rank, HookBeforeLLMCall)
		add(t, &t.afterLLMCall, p, rank, HookAfterLLMCall)
		add(t, &t.beforeToolCall, p, rank, HookBeforeToolCall)
		add(t, &t.afterToolCall, p, rank, HookAfterToolCall)
		add(t, &t.continuePrompt, p, rank, HookContinuePrompt)
		add(t, &t.steeringInbox, p, rank, HookProvideSteeringInbox)
	}
	return t
}

// add appends p's implementation of hook h, if it has one, to list.
func add[T, S, C any](t *table[S, C], list *[]impl[T], p Plugin, rank int, h Hook) {
	v, ok := hookOf[T](p, h)
	if !ok {
		return
	}
	*list = append(*list, impl[T]{plugin: p.Name(), rank: rank, hook: v})
	t.names[h] = append(t.names[h], p.Name())
}

// HooksOf returns the hooks p implements, in [Specs] order, as a
// Registry[S, C] detects them. A host that serves a plugin remotely uses it
// to decide which endpoints to offer.
func HooksOf[S, C any](p Plugin) []Hook {
	t := newTable[S, C]([]Plugin{p})
	var out []Hook
	for _, s := range Specs() {
		if len(t.names[s.Hook]) > 0 {
			out = append(out, s.Hook)
		}
	}
	return out
}
