package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/bub"
)

// Defaults of [Config].
const (
	// DefaultModel is the built-in echo model, so a stack with no API key
	// starts and answers. Bub's own default, "openrouter:openrouter/free",
	// needs an OpenRouter key (BUB_OPENROUTER_API_KEY or BUB_API_KEY).
	DefaultModel = "echo:echo"
	// DefaultMaxTokens is Bub's max_tokens default.
	DefaultMaxTokens = 16384
)

// Base URLs of the providers that need no configured API base: the
// OpenAI-compatible ones and Anthropic's Messages API (package
// llm/anthropic). Every other provider (vllm, llamacpp, custom, ...) needs
// one.
const (
	OpenAIBaseURL     = "https://api.openai.com/v1"
	OpenRouterBaseURL = "https://openrouter.ai/api/v1"
	OllamaBaseURL     = "http://127.0.0.1:11434/v1"
	AnthropicBaseURL  = "https://api.anthropic.com"
)

// knownEndpoint is a provider whose base URL has a default.
type knownEndpoint struct {
	baseURL string
	// hosted providers need an API key when their default base is used.
	hosted bool
}

var knownEndpoints = map[string]knownEndpoint{
	"openai":     {baseURL: OpenAIBaseURL, hosted: true},
	"openrouter": {baseURL: OpenRouterBaseURL, hosted: true},
	"ollama":     {baseURL: OllamaBaseURL},
	"anthropic":  {baseURL: AnthropicBaseURL, hosted: true},
}

// Config holds the model settings of Bub's AgentSettings. Its zero value
// means the documented defaults: model [DefaultModel], no fallbacks, no
// key or base, max_tokens [DefaultMaxTokens], no per-call timeout, no
// completion args. Call [Config.Validate] (or [NewRouter]) before use.
//
// Config never prints its secrets: [Config.String], [Config.LogValue] and
// every fmt verb show key names, never key values.
type Config struct {
	// Model is the default "provider:model" (Bub's settings.model).
	Model string
	// FallbackModels are tried in order when a call to Model fails before
	// anything was streamed. They apply only to calls whose model is
	// exactly Model.
	FallbackModels []string
	// APIKey is used for every provider that has no entry in APIKeys.
	APIKey Secret
	// APIKeys maps a lower-case provider name to its key
	// (BUB_<PROVIDER>_API_KEY).
	APIKeys map[string]Secret
	// APIBase is used for every provider that has no entry in APIBases,
	// before the provider's default base URL.
	APIBase string
	// APIBases maps a lower-case provider name to its base URL
	// (BUB_<PROVIDER>_API_BASE).
	APIBases map[string]string
	// MaxTokens is the max_tokens of a call that sets none; 0 means
	// [DefaultMaxTokens].
	MaxTokens int
	// ModelTimeout bounds each provider call (each fallback candidate
	// separately); 0 means no timeout.
	ModelTimeout time.Duration
	// CompletionArgs are extra request fields merged under the managed
	// ones: they never override model, messages, tools, max_tokens,
	// stream or stream_options, and reasoning_effort only when the call
	// sets none.
	CompletionArgs map[string]any
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if strings.TrimSpace(c.Model) == "" {
		c.Model = DefaultModel
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	return c
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Model) != "" {
		if _, _, err := ParseModel(c.Model); err != nil {
			errs = append(errs, fmt.Errorf("model: %w", err))
		}
	}
	for i, m := range c.FallbackModels {
		if _, _, err := ParseModel(m); err != nil {
			errs = append(errs, fmt.Errorf("fallback_models[%d]: %w", i, err))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(c.APIKeys)) {
		errs = append(errs, checkProviderKey("api_keys", p))
	}
	for _, p := range slices.Sorted(maps.Keys(c.APIBases)) {
		errs = append(errs, checkProviderKey("api_bases", p))
		errs = append(errs, checkBaseURL(fmt.Sprintf("api_bases[%s]", p), c.APIBases[p]))
	}
	if c.APIBase != "" {
		errs = append(errs, checkBaseURL("api_base", c.APIBase))
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("max_tokens must not be negative, got %d", c.MaxTokens))
	}
	if c.ModelTimeout < 0 {
		errs = append(errs, fmt.Errorf("model_timeout must not be negative, got %s", c.ModelTimeout))
	}
	return errors.Join(errs...)
}

func checkProviderKey(field, provider string) error {
	if provider == "" || provider != strings.ToLower(strings.TrimSpace(provider)) {
		return fmt.Errorf("%s: provider name %q must be non-empty, trimmed and lower-case", field, provider)
	}
	return nil
}

func checkBaseURL(field, base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", field, redactURL(base))
	}
	return nil
}

// ProviderConfig is what a [ProviderFactory] needs to build the provider
// of one name: its resolved base URL and key and the completion args.
type ProviderConfig struct {
	Provider       string
	BaseURL        string
	APIKey         Secret
	CompletionArgs map[string]any
}

// ProviderConfig resolves the endpoint of provider: the base URL from
// APIBases, then APIBase, then the provider's default (openai, openrouter,
// ollama, anthropic); the key from APIKeys, then APIKey. A provider with no
// base URL, and a hosted provider (openai, openrouter, anthropic) at its
// default base with no key, are *bub.Error config errors that name the
// setting to add.
func (c Config) ProviderConfig(provider string) (ProviderConfig, error) {
	pc, hosted, err := c.endpoint(provider)
	if err != nil {
		return ProviderConfig{}, err
	}
	if hosted && pc.APIKey == "" {
		return ProviderConfig{}, &bub.Error{
			Kind:    bub.KindConfig,
			Message: fmt.Sprintf("no API key for provider %q: set %s or BUB_API_KEY", provider, EnvAPIKey(provider)),
			Details: map[string]any{"provider": provider, "setting": EnvAPIKey(provider)},
		}
	}
	return pc, nil
}

// endpoint resolves provider's base URL and key; hosted reports that the
// default base of a hosted provider is used, which needs a key.
func (c Config) endpoint(provider string) (pc ProviderConfig, hosted bool, err error) {
	pc = ProviderConfig{Provider: provider, CompletionArgs: c.CompletionArgs}
	pc.APIKey = c.APIKey
	if key, ok := c.APIKeys[provider]; ok {
		pc.APIKey = key
	}
	pc.BaseURL = c.APIBase
	if base, ok := c.APIBases[provider]; ok {
		pc.BaseURL = base
	}
	if pc.BaseURL != "" {
		return pc, false, nil
	}
	known, ok := knownEndpoints[provider]
	if !ok {
		return ProviderConfig{}, false, &bub.Error{
			Kind:    bub.KindConfig,
			Message: fmt.Sprintf("provider %q has no API base URL: set %s or BUB_API_BASE", provider, EnvAPIBase(provider)),
			Details: map[string]any{"provider": provider, "setting": EnvAPIBase(provider)},
		}
	}
	pc.BaseURL = known.baseURL
	return pc, known.hosted, nil
}

// String describes the effective config without secrets: key values are
// never printed, only which providers have one.
func (c Config) String() string {
	var b strings.Builder
	for i, a := range c.attrs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value)
	}
	return b.String()
}

// Format prints [Config.String] for every verb, so no fmt verb can reveal
// a secret.
func (c Config) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, c.String()) }

// LogValue implements [slog.LogValuer] with the same redacted view as
// [Config.String].
func (c Config) LogValue() slog.Value { return slog.GroupValue(c.attrs()...) }

func (c Config) attrs() []slog.Attr {
	c = c.WithDefaults()
	bases := make(map[string]string, len(c.APIBases))
	for p, base := range c.APIBases {
		bases[p] = redactURL(base)
	}
	return []slog.Attr{
		slog.String("model", c.Model),
		slog.Any("fallback_models", c.FallbackModels),
		slog.String("api_key", c.APIKey.String()),
		slog.Any("api_keys", slices.Sorted(maps.Keys(c.APIKeys))),
		slog.String("api_base", redactURL(c.APIBase)),
		slog.Any("api_bases", bases),
		slog.Int("max_tokens", c.MaxTokens),
		slog.Duration("model_timeout", c.ModelTimeout),
		slog.Any("completion_args", slices.Sorted(maps.Keys(c.CompletionArgs))),
	}
}

// redactURL hides a password and the query (which may carry a token) of a
// base URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return redacted
	}
	if u.RawQuery != "" {
		u.RawQuery = redacted
	}
	return u.Redacted()
}
