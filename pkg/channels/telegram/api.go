package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/channels"
)

// maxResponse bounds a Bot API answer (a getUpdates batch of 100 updates
// is far smaller).
const maxResponse = 16 << 20

// maxRetryAfter is the longest retry_after a call waits for before it
// gives up instead.
const maxRetryAfter = time.Minute

// callAttempts bounds the attempts of a call answered 429.
const callAttempts = 3

// APIError is an error answer of the Bot API ({ok:false, error_code,
// description, parameters}).
type APIError struct {
	Method      string
	Code        int
	Description string
	// RetryAfter is parameters.retry_after: how long a 429 asks to wait.
	RetryAfter time.Duration
}

// Error returns the method, code and description, and the wait a 429
// asks for.
func (e *APIError) Error() string {
	s := fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	return s
}

// Wait is how long a 429 asks to wait before calling again
// (channels.RetryAfter), 0 for other errors.
func (e *APIError) Wait() time.Duration {
	if e.Code != http.StatusTooManyRequests {
		return 0
	}
	return e.RetryAfter
}

// Is reports a 400 (Bad Request: chat not found, …) or a 403 (Forbidden:
// bot was blocked by the user, …) as [channels.ErrUndeliverable]: the
// same call cannot succeed later, so the gateway dead-letters the reply at
// once instead of retrying it (and holding back the chat's later replies
// behind it).
func (e *APIError) Is(target error) bool {
	return target == channels.ErrUndeliverable && (e.Code == http.StatusBadRequest || e.Code == http.StatusForbidden)
}

// client calls the Bot API over plain HTTP.
type client struct {
	base  string // API base without trailing slash
	token string
	http  *http.Client
}

func newClient(cfg Config) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.Proxy != "" {
		u, err := url.Parse(cfg.Proxy)
		if err != nil {
			return nil, fmt.Errorf("telegram proxy: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	return &client{base: cfg.apiBase(), token: cfg.Token, http: &http.Client{Transport: tr}}, nil
}

// answer is the Bot API response envelope.
type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// call runs method with params (JSON-encoded) and decodes the result into
// result (nil to ignore it).
func (c *client) call(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram %s: encoding parameters: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/bot"+c.token+"/"+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, redact(err, c.token))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, redact(err, c.token))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("telegram %s: reading answer: %w", method, err)
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("telegram %s: HTTP %d with an answer that is not Bot API JSON: %w", method, resp.StatusCode, err)
	}
	if !a.OK {
		e := &APIError{Method: method, Code: a.ErrorCode, Description: a.Description}
		if e.Code == 0 {
			e.Code = resp.StatusCode
		}
		if a.Parameters != nil && a.Parameters.RetryAfter > 0 {
			e.RetryAfter = time.Duration(a.Parameters.RetryAfter) * time.Second
		}
		return e
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(a.Result, result); err != nil {
		return fmt.Errorf("telegram %s: decoding result: %w", method, err)
	}
	return nil
}

// callRetry is call that waits out up to callAttempts-1 answers of 429
// Too Many Requests, each for its retry_after (at most maxRetryAfter).
func (c *client) callRetry(ctx context.Context, method string, params, result any) error {
	for attempt := 1; ; attempt++ {
		err := c.call(ctx, method, params, result)
		wait, ok := retryAfter(err)
		if !ok || attempt == callAttempts {
			return err
		}
		if werr := sleep(ctx, wait); werr != nil {
			return fmt.Errorf("%w; waiting to retry: %w", err, werr)
		}
	}
}

// retryAfter reports whether err is a 429 worth waiting out, and how long.
func retryAfter(err error) (time.Duration, bool) {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != http.StatusTooManyRequests || ae.RetryAfter > maxRetryAfter {
		return 0, false
	}
	return ae.RetryAfter, true
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// download fetches a file by file_id: getFile, then the file itself, at
// most limit bytes (errTooLarge beyond).
func (c *client) download(ctx context.Context, fileID string, limit int64) ([]byte, error) {
	var f struct {
		FilePath string `json:"file_path"`
		FileSize int64  `json:"file_size"`
	}
	if err := c.call(ctx, "getFile", map[string]string{"file_id": fileID}, &f); err != nil {
		return nil, err
	}
	if f.FilePath == "" {
		return nil, errors.New("telegram getFile: no file_path in the answer")
	}
	if f.FileSize > limit {
		return nil, errTooLarge
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/file/bot"+c.token+"/"+f.FilePath, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram file: %w", redact(err, c.token))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("telegram file: %w", redact(err, c.token))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("telegram file: HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("telegram file: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// errTooLarge reports a file over the download limit.
var errTooLarge = errors.New("telegram file is over the download limit")

// redact hides the token in a transport error (url.Error quotes the
// request URL, which holds it).
func redact(err error, token string) error {
	var ue *url.Error
	if token == "" || !errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("%s %s: %w", ue.Op, strings.ReplaceAll(ue.URL, token, "<token>"), ue.Err)
}
