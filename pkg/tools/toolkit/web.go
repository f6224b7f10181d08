package toolkit

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/unicode"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

const (
	defaultFetchTimeout  = 10 // seconds
	defaultMaxFetchBytes = 5 << 20
)

// StatusError is an HTTP error status answered to web.fetch. As a
// [tools.DetailedError] it adds status and url to the tool error.
type StatusError struct {
	Status int
	URL    string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s for url %s", e.Status, http.StatusText(e.Status), e.URL)
}

// ErrorDetails returns {status, url}.
func (e *StatusError) ErrorDetails() map[string]any {
	return map[string]any{"status": e.Status, "url": e.URL}
}

var _ tools.DetailedError = (*StatusError)(nil)

func webTools(opts Options) []tools.Tool {
	client := opts.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	limit := opts.MaxFetchBytes
	if limit <= 0 {
		limit = defaultMaxFetchBytes
	}
	return []tools.Tool{
		withParams(tools.Tool{
			Name:        "web.fetch",
			Effect:      tools.EffectReadOnly,
			Description: "Fetch(GET) the content of a web page, returning markdown if possible.",
			Handler: func(ctx context.Context, _ *tools.Context, args map[string]any) (any, error) {
				return fetch(ctx, client, limit, args)
			},
		},
			param{name: "url", typ: "string", description: "The http or https URL to fetch.", required: true},
			param{name: "headers", typ: "object", description: "Request headers; they override the default accept: text/markdown."},
			param{name: "timeout", typ: "integer", description: "Seconds before the request is abandoned (default 10)."},
		),
	}
}

func fetch(ctx context.Context, client *http.Client, limit int64, args map[string]any) (any, error) {
	raw := stringArg(args, "url")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bub.Errorf(bub.KindInvalidInput, "url must be an absolute http or https URL, not '%s'", raw)
	}
	timeout, ok := intArg(args, "timeout")
	if !ok || timeout <= 0 {
		timeout = defaultFetchTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, seconds(timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/markdown")
	if headers, ok := args["headers"].(map[string]any); ok {
		for k, v := range headers {
			req.Header.Set(k, fmt.Sprint(v))
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= http.StatusBadRequest {
		return nil, &StatusError{Status: resp.StatusCode, URL: u.String()}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", u, err)
	}
	text := ""
	if int64(len(body)) > limit {
		body = body[:limit]
		text = fmt.Sprintf("\n\n[truncated: the response is longer than %d bytes]", limit)
	}
	return decodeText(body, resp.Header.Get("Content-Type")) + text, nil
}

// decodeText is body as text in the charset its Content-Type declares
// (as aiohttp's response.text() reads it), UTF-8 without one; bytes that
// do not decode become U+FFFD.
func decodeText(body []byte, contentType string) string {
	if _, params, err := mime.ParseMediaType(contentType); err == nil && params["charset"] != "" {
		if enc, err := htmlindex.Get(params["charset"]); err == nil && enc != unicode.UTF8 {
			if b, err := enc.NewDecoder().Bytes(body); err == nil {
				body = b
			}
		}
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}
