package anthropic

import (
	"context"
	"net/http"
	"strings"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/internal/endpoint"
)

// Name is the provider name that selects this provider ("anthropic:<model>").
const Name = "anthropic"

// Option configures a [Provider].
type Option func(*options) error

// options are what New builds a Provider from.
type options struct {
	endpoint.Options
}

// WithBaseURL sets the API base URL (default [llm.AnthropicBaseURL]). The
// SDK appends /v1/messages, so a trailing "/v1" in base is dropped:
// "https://api.anthropic.com/v1" and "https://api.anthropic.com" are the
// same endpoint.
func WithBaseURL(base string) Option { return endpoint.BaseURL[options](base) }

// WithAPIKey sets the API key; without one no credential is sent (for a
// local proxy that adds it).
func WithAPIKey(key llm.Secret) Option { return endpoint.APIKey[options](key) }

// WithName sets the provider name reported in errors (default [Name]).
func WithName(name string) Option { return endpoint.Name[options](name) }

// WithHTTPClient sets the HTTP client. The default, shared by the process's
// providers, is http.DefaultTransport's settings keeping up to 1,024 idle
// connections per host (net/http keeps 2), so the connections of
// concurrent calls are reused rather than dialled again.
func WithHTTPClient(c *http.Client) Option { return endpoint.HTTPClient[options](c) }

// WithMaxRetries sets how often the SDK retries a connection error, 408,
// 409, 429, 5xx or 529 (overloaded) before the first byte (SDK default 2;
// 0 disables).
func WithMaxRetries(n int) Option { return endpoint.MaxRetries[options](n) }

// WithCompletionArgs sets extra request fields (temperature, top_k,
// stop_sequences, ...), merged under the managed ones (see
// [Provider.Complete]).
func WithCompletionArgs(args map[string]any) Option {
	return endpoint.CompletionArgs[options](args)
}

// Provider calls the Anthropic Messages API with streaming. It is safe for
// concurrent use.
type Provider struct {
	name           string
	completionArgs map[string]any
	messages       asdk.MessageService
	thinking       *thinkingCache
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for the endpoint the options describe. It never
// reads ANTHROPIC_* environment variables or SDK profiles: everything
// comes from options.
func New(opts ...Option) (*Provider, error) {
	o := options{endpoint.Options{Pkg: Name, Name: Name, BaseURL: llm.AnthropicBaseURL}}
	if err := endpoint.Apply(&o, opts); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(o.BaseURL, "/"), "/v1") + "/"
	reqOpts := endpoint.RequestOptions(&o.Options, base, option.WithBaseURL, option.WithAPIKey, withHTTPClient, option.WithMaxRetries)
	return &Provider{
		name:           o.Name,
		completionArgs: o.CompletionArgs,
		// NewMessageService, unlike NewClient, adds no defaults read from
		// the environment or a profile on disk.
		messages: asdk.NewMessageService(reqOpts...),
		thinking: newThinkingCache(thinkingCacheSize),
	}, nil
}

// withHTTPClient is option.WithHTTPClient for an *http.Client.
func withHTTPClient(c *http.Client) option.RequestOption { return option.WithHTTPClient(c) }

// Factory returns an [llm.ProviderFactory] that builds a Provider from a
// resolved [llm.ProviderConfig] (its base URL, key, name and completion
// args), then applies opts.
func Factory(opts ...Option) llm.ProviderFactory {
	return func(pc llm.ProviderConfig) (llm.Provider, error) {
		return New(append([]Option{endpoint.FromConfig[options](pc)}, opts...)...)
	}
}

// Complete streams one message. The request is built from call:
//
//   - The system messages become the top-level system field, one text
//     block each; the other messages keep their order. A user message's
//     text and image parts become text and image blocks (a data: URL is
//     sent as base64, any other URL as a URL source); video and audio
//     parts are an invalid_input error, which Anthropic cannot take. An
//     assistant message becomes its text block followed by one tool_use
//     block per tool call (arguments that are not a JSON object are sent
//     as {}). Consecutive tool messages become one user message of
//     tool_result blocks. Empty text is left out, as the API rejects empty
//     text blocks.
//   - Prompt caching, as Bub sets cache_control {type: ephemeral} for
//     Anthropic: the request's top-level cache_control (the API puts it on
//     the last cacheable block, so the conversation so far is cached), and
//     explicit breakpoints on the last system block and the last tool
//     definition, so the stable prefix stays cached as the conversation
//     grows.
//   - max_tokens is the call's (Anthropic requires one; 0 means
//     [llm.DefaultMaxTokens]).
//   - A reasoning effort turns on extended thinking with a budget: minimal
//     1024 tokens, low 2048, medium 8192, high 24576, xhigh and max 32768,
//     capped below max_tokens; "none" turns it off. Without one, a
//     completion arg reasoning_effort is used the same way. Thinking stays
//     off for a call that continues a tool loop whose thinking blocks this
//     provider does not hold (they carry a signature that Bub's messages
//     cannot; the provider keeps those of the tool calls it returned), as
//     the API refuses such a call with thinking on.
//   - The completion args are merged under the managed fields model,
//     messages, system, tools, max_tokens, stream, cache_control (and
//     thinking when an effort applies); stream_options, which Anthropic
//     does not know, is dropped.
//
// Text and thinking deltas reach onDelta as "text" and "reasoning" as they
// arrive. Usage: prompt_tokens is input_tokens plus the cache reads and
// writes, with prompt_tokens_details cached_tokens (cache reads) and
// cache_write_tokens (cache writes). A cancelled ctx returns ctx's error;
// any other failure is a *bub.Error of kind provider, as from package
// llm/openai: details hold the provider, the model, the API's message,
// its error type and, for an HTTP error, status_code.
func (p *Provider) Complete(ctx context.Context, call llm.Call, onDelta func(llm.Delta)) (llm.Response, error) {
	params, err := p.params(call)
	if err != nil {
		return llm.Response{}, err
	}
	stream := p.messages.NewStreaming(ctx, params)
	msg, err := consume(stream, onDelta)
	if err != nil {
		if ctx.Err() != nil {
			return llm.Response{}, ctx.Err()
		}
		return llm.Response{}, p.providerError(call.Model, err)
	}
	p.thinking.remember(msg)
	return response(msg), nil
}
