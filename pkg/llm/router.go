package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/bubbus/bub/pkg/bub"
)

// ProviderFactory builds the provider for a name that has no registered
// provider, from its resolved [ProviderConfig]. The OpenAI-compatible and
// the Anthropic providers offer one (see packages llm/openai and
// llm/anthropic).
type ProviderFactory func(ProviderConfig) (Provider, error)

// RouterOption configures a [Router].
type RouterOption func(*Router) error

// WithProvider registers p under a provider name (the part of a model
// string before ':'). Registering a name twice is an error.
func WithProvider(name string, p Provider) RouterOption {
	return func(r *Router) error {
		if name == "" || p == nil {
			return errors.New("llm: provider registration needs a name and a provider")
		}
		if _, dup := r.registered[name]; dup {
			return fmt.Errorf("llm: provider %q registered twice", name)
		}
		r.registered[name] = p
		return nil
	}
}

// WithFactory sets the factory for every provider name without a
// registered provider. A later WithFactory replaces an earlier one.
func WithFactory(f ProviderFactory) RouterOption {
	return func(r *Router) error {
		r.factory = f
		return nil
	}
}

// WithProviderFactory sets the factory of one provider name; for that
// name it wins over [WithFactory]. A later WithProviderFactory for the
// same name replaces an earlier one. (Package llm/providers sets one for
// "anthropic".)
func WithProviderFactory(name string, f ProviderFactory) RouterOption {
	return func(r *Router) error {
		if name == "" || f == nil {
			return errors.New("llm: provider factory registration needs a name and a factory")
		}
		r.factories[name] = f
		return nil
	}
}

// WithLogger sets the logger that reports fallbacks (nil discards).
func WithLogger(l *slog.Logger) RouterOption {
	return func(r *Router) error {
		if l != nil {
			r.logger = l
		}
		return nil
	}
}

// Router is a [Provider] whose model namespace is "provider:model": it picks
// the provider by the prefix of [Call.Model] and passes it the model id
// without the prefix. It is safe for concurrent use.
//
// Its rules are Bub's provider call:
//   - An empty Call.Model means the configured default model, and a zero
//     Call.MaxTokens the configured max tokens.
//   - Fallback: the candidates are the model, then Config.FallbackModels
//     only when the model is exactly the default model. A candidate that
//     fails before it streamed anything to onDelta (call creation: bad
//     config, HTTP error, timeout before the first delta) is followed by
//     the next; one that fails after streaming is not, so a user never sees
//     two answers spliced together. When every candidate fails the first
//     error is returned.
//   - Each candidate call is bounded by Config.ModelTimeout; running out is
//     a *bub.Error of kind provider.
//   - A cancelled ctx returns ctx's error and stops the fallback.
type Router struct {
	cfg        Config
	registered map[string]Provider
	factories  map[string]ProviderFactory
	factory    ProviderFactory
	logger     *slog.Logger

	// mu guards built, the providers made by factory, by name.
	mu    sync.Mutex
	built map[string]Provider
}

var _ Provider = (*Router)(nil)

// NewRouter validates cfg and returns a router over the registered
// providers and the factory. The configured model and fallbacks must
// resolve: a name with neither a registered provider nor a factory, or a
// provider without a base URL, is an error now rather than on the first
// turn. (A missing key is reported at call time.) Looking for the standard
// wiring of echo plus the OpenAI-compatible provider? See package
// llm/providers.
func NewRouter(cfg Config, opts ...RouterOption) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llm: invalid config: %w", err)
	}
	r := &Router{
		cfg:        cfg.WithDefaults(),
		registered: map[string]Provider{},
		factories:  map[string]ProviderFactory{},
		logger:     slog.New(slog.DiscardHandler),
		built:      map[string]Provider{},
	}
	for _, opt := range opts {
		if err := opt(r); err != nil {
			return nil, err
		}
	}
	for _, m := range append([]string{r.cfg.Model}, r.cfg.FallbackModels...) {
		name, _, _ := ParseModel(m) // validated above
		if _, ok := r.registered[name]; ok {
			continue
		}
		if r.factoryOf(name) == nil {
			return nil, errNoProvider(name)
		}
		if _, _, err := r.cfg.endpoint(name); err != nil {
			return nil, fmt.Errorf("llm: model %s: %w", m, err)
		}
	}
	return r, nil
}

// Config returns the effective config (defaults applied).
func (r *Router) Config() Config { return r.cfg }

// Complete calls the model named by call.Model ("provider:model", empty for
// the default) with the fallback rules of [Router].
func (r *Router) Complete(ctx context.Context, call Call, onDelta func(Delta)) (Response, error) {
	model := call.Model
	if model == "" {
		model = r.cfg.Model
	}
	if call.MaxTokens == 0 {
		call.MaxTokens = r.cfg.MaxTokens
	}
	candidates := []string{model}
	if model == r.cfg.Model {
		candidates = append(candidates, r.cfg.FallbackModels...)
	}
	var first error
	for i, candidate := range candidates {
		resp, streamed, err := r.try(ctx, candidate, call, onDelta)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		if streamed {
			return Response{}, err
		}
		if first == nil {
			first = err
		}
		if i+1 < len(candidates) {
			r.logger.WarnContext(ctx, "llm: model call failed, trying fallback",
				"model", candidate, "fallback", candidates[i+1], "error", err)
		}
	}
	return Response{}, first
}

// try calls one candidate; streamed reports that a delta reached onDelta.
func (r *Router) try(ctx context.Context, model string, call Call, onDelta func(Delta)) (resp Response, streamed bool, err error) {
	name, id, err := ParseModel(model)
	if err != nil {
		return Response{}, false, err
	}
	p, err := r.provider(name)
	if err != nil {
		return Response{}, false, err
	}
	call.Model = id
	callCtx := ctx
	if r.cfg.ModelTimeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, r.cfg.ModelTimeout)
		defer cancel()
	}
	var sent atomic.Bool
	resp, err = p.Complete(callCtx, call, func(d Delta) {
		sent.Store(true)
		if onDelta != nil {
			onDelta(d)
		}
	})
	if err != nil && ctx.Err() == nil && callCtx.Err() != nil {
		err = &bub.Error{
			Kind:    bub.KindProvider,
			Message: fmt.Sprintf("model %s timed out after %s", model, r.cfg.ModelTimeout),
			Details: map[string]any{"model": model, "timeout_seconds": r.cfg.ModelTimeout.Seconds()},
		}
	}
	return resp, sent.Load(), err
}

// factoryOf returns the factory for name: its own, else the general one
// (nil when there is neither).
func (r *Router) factoryOf(name string) ProviderFactory {
	if f, ok := r.factories[name]; ok {
		return f
	}
	return r.factory
}

// provider returns the registered provider of name, or the one its
// factory built for it (built once, then reused).
func (r *Router) provider(name string) (Provider, error) {
	if p, ok := r.registered[name]; ok {
		return p, nil
	}
	factory := r.factoryOf(name)
	if factory == nil {
		return nil, errNoProvider(name)
	}
	pc, err := r.cfg.ProviderConfig(name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.built[name]; ok {
		return p, nil
	}
	p, err := factory(pc)
	if err != nil {
		return nil, err
	}
	r.built[name] = p
	return p, nil
}

func errNoProvider(name string) *bub.Error {
	return &bub.Error{
		Kind:    bub.KindConfig,
		Message: fmt.Sprintf("no provider registered for %q", name),
		Details: map[string]any{"provider": name},
	}
}
