package endpoint

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/bubbus/bub/pkg/llm"
)

// Options are the endpoint settings of an SDK-backed provider. A
// provider's options struct embeds them, which makes it a [Holder].
type Options struct {
	// Pkg is the provider package's name ("openai"), which starts the
	// text of an option's error.
	Pkg            string
	Name           string
	BaseURL        string
	APIKey         llm.Secret
	HTTPClient     *http.Client
	MaxRetries     *int
	CompletionArgs map[string]any
}

// Endpoint returns o, so that an options struct embedding Options is a
// [Holder].
func (o *Options) Endpoint() *Options { return o }

// Holder is a pointer to a provider's options struct T, which embeds
// [Options].
type Holder[T any] interface {
	*T
	Endpoint() *Options
}

// set returns the option that applies f to T's Options.
func set[T any, P Holder[T]](f func(*Options) error) func(*T) error {
	return func(t *T) error { return f(P(t).Endpoint()) }
}

// BaseURL sets the API base URL, which must be an http(s) URL with a host.
func BaseURL[T any, P Holder[T]](base string) func(*T) error {
	return set[T, P](func(o *Options) error {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: base URL %q is not an http(s) URL", o.Pkg, base)
		}
		o.BaseURL = base
		return nil
	})
}

// APIKey sets the API key; an empty one sends no credential.
func APIKey[T any, P Holder[T]](key llm.Secret) func(*T) error {
	return set[T, P](func(o *Options) error {
		o.APIKey = key
		return nil
	})
}

// Name sets the provider name reported in errors.
func Name[T any, P Holder[T]](name string) func(*T) error {
	return set[T, P](func(o *Options) error {
		o.Name = name
		return nil
	})
}

// HTTPClient sets the HTTP client, which must not be nil.
func HTTPClient[T any, P Holder[T]](c *http.Client) func(*T) error {
	return set[T, P](func(o *Options) error {
		if c == nil {
			return errors.New(o.Pkg + ": nil HTTP client")
		}
		o.HTTPClient = c
		return nil
	})
}

// MaxRetries sets how often the SDK retries, which must not be negative.
func MaxRetries[T any, P Holder[T]](n int) func(*T) error {
	return set[T, P](func(o *Options) error {
		if n < 0 {
			return fmt.Errorf("%s: max retries must not be negative, got %d", o.Pkg, n)
		}
		o.MaxRetries = &n
		return nil
	})
}

// CompletionArgs sets the extra request fields.
func CompletionArgs[T any, P Holder[T]](args map[string]any) func(*T) error {
	return set[T, P](func(o *Options) error {
		o.CompletionArgs = args
		return nil
	})
}

// FromConfig sets what a resolved [llm.ProviderConfig] holds: the name,
// base URL, key and completion args.
func FromConfig[T any, P Holder[T]](pc llm.ProviderConfig) func(*T) error {
	return func(t *T) error {
		return Apply(t, []func(*T) error{
			Name[T, P](pc.Provider),
			BaseURL[T, P](pc.BaseURL),
			APIKey[T, P](pc.APIKey),
			CompletionArgs[T, P](pc.CompletionArgs),
		})
	}
}

// Apply applies opts to t in order and stops at the first error.
func Apply[T any, O ~func(*T) error](t *T, opts []O) error {
	for _, opt := range opts {
		if err := opt(t); err != nil {
			return err
		}
	}
	return nil
}

// maxIdleConnsPerHost is how many idle connections to one provider host
// the default client keeps: every connection a burst of concurrent model
// calls opened, up to a worker's usual concurrency, so the next burst
// reuses them instead of dialling (and, over TLS, shaking hands) again.
// net/http's default keeps 2. Idle connections close after the
// transport's IdleConnTimeout (90s).
const maxIdleConnsPerHost = 1024

// defaultClient is the HTTP client of every provider not given one, one
// per process: see [clientFor].
var defaultClient = sync.OnceValue(func() *http.Client { return clientFor(http.DefaultTransport) })

// clientFor returns a client over a clone of rt, when it is an
// *http.Transport (as http.DefaultTransport is: proxy from the environment,
// HTTP/2 over TLS, its timeouts), that keeps up to [maxIdleConnsPerHost]
// idle connections to each host and bounds the TLS handshakes a burst
// starts with an HTTP/2 host (see [gatedTransport]). A program that
// replaced http.DefaultTransport with another RoundTripper gets a client
// over it, unchanged.
func clientFor(rt http.RoundTripper) *http.Client {
	t, ok := rt.(*http.Transport)
	if !ok {
		return &http.Client{Transport: rt}
	}
	t = t.Clone()
	t.MaxIdleConns = 0 // no limit across hosts
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	return &http.Client{Transport: gate(t)}
}

// RequestOptions returns an SDK's request options for o, built with the
// SDK's own constructors (of its option type R): base as the base URL,
// then the key only when o sets one, the HTTP client (o's, else
// [defaultClient]) and the retry count only when o sets it, so the SDK
// keeps its default otherwise.
func RequestOptions[R any](o *Options, base string, baseURL, apiKey func(string) R, httpClient func(*http.Client) R, maxRetries func(int) R) []R {
	reqOpts := []R{baseURL(base)}
	if o.APIKey != "" {
		reqOpts = append(reqOpts, apiKey(string(o.APIKey)))
	}
	c := o.HTTPClient
	if c == nil {
		c = defaultClient()
	}
	reqOpts = append(reqOpts, httpClient(c))
	if o.MaxRetries != nil {
		reqOpts = append(reqOpts, maxRetries(*o.MaxRetries))
	}
	return reqOpts
}
