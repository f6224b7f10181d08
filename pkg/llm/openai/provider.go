package openai

import (
	"context"
	"io"
	"net/http"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/internal/endpoint"
)

// Option configures a [Provider].
type Option func(*options) error

// options are what New builds a Provider from.
type options struct {
	endpoint.Options
	maxTokensKey string
}

// WithBaseURL sets the API base URL, e.g. "http://127.0.0.1:8000/v1"
// (default [llm.OpenAIBaseURL]).
func WithBaseURL(base string) Option { return endpoint.BaseURL[options](base) }

// WithAPIKey sets the bearer key; without one no Authorization header is
// sent (fine for local servers).
func WithAPIKey(key llm.Secret) Option { return endpoint.APIKey[options](key) }

// WithName sets the provider name reported in errors (default "openai").
func WithName(name string) Option { return endpoint.Name[options](name) }

// WithHTTPClient sets the HTTP client. The default, shared by the process's
// providers, is http.DefaultTransport's settings keeping up to 1,024 idle
// connections per host (net/http keeps 2), so the connections of
// concurrent calls are reused rather than dialled again.
func WithHTTPClient(c *http.Client) Option { return endpoint.HTTPClient[options](c) }

// WithMaxRetries sets how often the SDK retries a connection error, 408,
// 409, 429 or 5xx before the first byte (SDK default 2; 0 disables).
func WithMaxRetries(n int) Option { return endpoint.MaxRetries[options](n) }

// WithCompletionArgs sets extra request fields, merged under the managed
// ones (see [Provider.Complete]).
func WithCompletionArgs(args map[string]any) Option {
	return endpoint.CompletionArgs[options](args)
}

// WithMaxCompletionTokens sends the token limit as max_completion_tokens,
// which OpenAI's own API requires for its reasoning models, instead of
// max_tokens, which every OpenAI-compatible server understands.
func WithMaxCompletionTokens() Option {
	return func(o *options) error {
		o.maxTokensKey = keyMaxCompletionTokens
		return nil
	}
}

// Provider calls an OpenAI-compatible /chat/completions endpoint with
// streaming. It is safe for concurrent use.
type Provider struct {
	name           string
	completionArgs map[string]any
	maxTokensKey   string
	// opts are the SDK request options (see stream): only these, where
	// NewClient would add defaults read from the environment.
	opts []option.RequestOption
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for the endpoint the options describe. It never
// reads OPENAI_* environment variables: everything comes from options.
func New(opts ...Option) (*Provider, error) {
	o := options{endpoint.Options{Pkg: "openai", Name: "openai", BaseURL: llm.OpenAIBaseURL}, keyMaxTokens}
	if err := endpoint.Apply(&o, opts); err != nil {
		return nil, err
	}
	reqOpts := endpoint.RequestOptions(&o.Options, o.BaseURL, option.WithBaseURL, option.WithAPIKey, withHTTPClient, option.WithMaxRetries)
	return &Provider{
		name:           o.Name,
		completionArgs: o.CompletionArgs,
		maxTokensKey:   o.maxTokensKey,
		opts:           reqOpts,
	}, nil
}

// withHTTPClient is option.WithHTTPClient for an *http.Client.
func withHTTPClient(c *http.Client) option.RequestOption { return option.WithHTTPClient(c) }

// Factory returns an [llm.ProviderFactory] that builds a Provider from a
// resolved [llm.ProviderConfig] (its base URL, key, name and completion
// args), then applies opts. OpenAI's own API gets max_completion_tokens.
func Factory(opts ...Option) llm.ProviderFactory {
	return func(pc llm.ProviderConfig) (llm.Provider, error) {
		base := []Option{endpoint.FromConfig[options](pc)}
		if pc.BaseURL == llm.OpenAIBaseURL {
			base = append(base, WithMaxCompletionTokens())
		}
		return New(append(base, opts...)...)
	}
}

// stream posts body, which asks for a stream itself, to
// /chat/completions and returns the stream of the answer, with the HTTP
// response put in into. Posting the body's bytes as they are (the
// client's generic Post) sends the one copy requestBody made:
// ChatCompletionService.NewStreaming would take them as parameters, copy
// them when it serializes those and again when it sets "stream".
func (p *Provider) stream(ctx context.Context, body []byte, into **http.Response) *ssestream.Stream[oai.ChatCompletionChunk] {
	// A client made here, not kept in the provider: a field of the
	// client's type keeps every service of the SDK in the binary (the
	// worker grows from 84 to 107 MB).
	client := oai.Client{Options: p.opts}
	err := client.Post(ctx, "chat/completions", body, into)
	if r := *into; err == nil && r != nil && r.Body != nil {
		r.Body = drainOnClose{r.Body}
	}
	return ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(*into), err)
}

// drainOnClose reads what is left of a body, up to maxDrain bytes and for
// at most drainWait, before closing it. The stream stops at "data: [DONE]"
// and closes the body, and net/http keeps an HTTP/1.1 connection for the
// next call only when its body was read to the end: when the chunked
// body's terminator came in a later read than [DONE], the connection was
// dropped and the next call dialed a new one (a TLS handshake against a
// real provider). The answer is complete at [DONE]: a server slow to end
// its response (or one that never does) costs its connection, not the
// call's time.
type drainOnClose struct{ io.ReadCloser }

// maxDrain bounds what Close reads (after [DONE] only the chunked
// encoding's terminator is left), drainWait how long it waits for it.
const (
	maxDrain  = 4 << 10
	drainWait = 50 * time.Millisecond
)

func (d drainOnClose) Close() error {
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.CopyN(io.Discard, d.ReadCloser, maxDrain)
	}()
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C: // closed unread: the connection goes, and the read ends
	}
	return d.ReadCloser.Close()
}

// Complete streams one chat completion. The request body is, by rising
// precedence (Bub's): the completion args; stream_options
// {include_usage: true}; the managed keys model, messages (as given,
// content parts included), tools (omitted when there are none),
// max_tokens (omitted when 0) and stream; reasoning_effort when the call
// sets one.
//
// Text and reasoning ("reasoning_content" or "reasoning" delta fields)
// reach onDelta as they arrive; tool calls are merged by index and usage is
// taken from any chunk that carries it. A cancelled ctx returns ctx's
// error; any other failure is a *bub.Error of kind provider whose details
// hold the HTTP status_code and the provider's message when there was a
// response.
func (p *Provider) Complete(ctx context.Context, call llm.Call, onDelta func(llm.Delta)) (llm.Response, error) {
	body, err := p.requestBody(call)
	if err != nil {
		return llm.Response{}, err
	}
	var httpResp *http.Response
	stream := p.stream(ctx, body, &httpResp)
	resp, err := consume(stream, onDelta)
	if err != nil {
		if ctx.Err() != nil {
			return llm.Response{}, ctx.Err()
		}
		return llm.Response{}, p.providerError(call.Model, err, httpResp)
	}
	return resp, nil
}
