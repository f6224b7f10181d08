package endpoint

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/llm"
)

type opts struct{ Options }

func TestOptionErrorsNameThePackage(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(*opts) error
		want string
	}{
		{"relative base", BaseURL[opts]("/v1"), `p: base URL "/v1" is not an http(s) URL`},
		{"ftp base", BaseURL[opts]("ftp://h/"), `p: base URL "ftp://h/" is not an http(s) URL`},
		{"nil client", HTTPClient[opts](nil), "p: nil HTTP client"},
		{"negative retries", MaxRetries[opts](-1), "p: max retries must not be negative, got -1"},
		{"config base", FromConfig[opts](llm.ProviderConfig{Provider: "x", BaseURL: "h:80"}), `p: base URL "h:80" is not an http(s) URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts{Options{Pkg: "p"}}
			if err := tc.opt(&o); err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFromConfigAndRequestOptions(t *testing.T) {
	o := opts{Options{Pkg: "p"}}
	pc := llm.ProviderConfig{Provider: "vllm", BaseURL: "http://127.0.0.1:8000/v1", APIKey: "k", CompletionArgs: map[string]any{"top_k": 3}}
	if err := Apply(&o, []func(*opts) error{FromConfig[opts](pc), MaxRetries[opts](0)}); err != nil {
		t.Fatal(err)
	}
	if o.Name != "vllm" || o.BaseURL != pc.BaseURL || o.APIKey != "k" || o.CompletionArgs["top_k"] != 3 || *o.MaxRetries != 0 {
		t.Fatalf("options = %+v", o.Options)
	}
	str := func(k string) func(string) string { return func(v string) string { return k + "=" + v } }
	got := RequestOptions(&o.Options, "B", str("base"), str("key"),
		func(*http.Client) string { return "client" }, func(n int) string { return "retries=" + strconv.Itoa(n) })
	if want := "base=B key=k client retries=0"; strings.Join(got, " ") != want {
		t.Errorf("request options = %q, want %q (the default client when none is set)", got, want)
	}
}

// TestClientFor: the default client keeps many idle connections per host
// over a clone of net/http's transport (behind the dial gate), and leaves a RoundTripper that is
// not an *http.Transport as it is (no panic for a program that replaced
// http.DefaultTransport).
func TestClientFor(t *testing.T) {
	noProxy(t)
	base := http.DefaultTransport.(*http.Transport)
	c := clientFor(base)
	g, ok := c.Transport.(*gatedTransport)
	if !ok || g.Transport == base || g.MaxIdleConnsPerHost != maxIdleConnsPerHost || g.MaxIdleConns != 0 || base.MaxIdleConnsPerHost == maxIdleConnsPerHost || base.DialTLSContext != nil {
		t.Errorf("transport %+v", c.Transport)
	}
	var other http.RoundTripper = roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	if c := clientFor(other); c.Transport == nil || reflect.ValueOf(c.Transport).Pointer() != reflect.ValueOf(other).Pointer() {
		t.Errorf("a custom RoundTripper is replaced: %T", c.Transport)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
