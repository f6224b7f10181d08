package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// maxErrorBody bounds how much of a non-JSON error body becomes the message.
const maxErrorBody = 512

// providerError turns a failed call into a *bub.Error of kind provider.
// Details: provider, model, message (the provider's own text), and when
// the server answered with an error status, status_code plus code, type
// and param when its body had them. resp is the HTTP response, if any.
func (p *Provider) providerError(model string, err error, resp *http.Response) *bub.Error {
	details := map[string]any{}
	var (
		apiErr    *oai.Error
		streamErr *ssestream.StreamError
		status    int
		msg       string
	)
	switch {
	case errors.As(err, &apiErr):
		status, msg = apiErr.StatusCode, apiErr.Message
		for key, v := range map[string]string{"code": apiErr.Code, "type": apiErr.Type, "param": apiErr.Param} {
			if v != "" {
				details[key] = v
			}
		}
		if msg == "" {
			// No OpenAI error object (HTML from a proxy, ...).
			msg = bodySnippet(status, apiErr.Response)
		}
	case resp != nil && resp.StatusCode >= http.StatusBadRequest:
		// An error body the SDK could not decode ({"error": "text"}, ...).
		status = resp.StatusCode
		msg = bodySnippet(status, resp)
	case errors.As(err, &streamErr):
		msg = streamErrorMessage(streamErr)
	default:
		msg = err.Error()
	}
	return llm.ProviderError(p.name, model, status, msg, details)
}

// bodySnippet returns the start of resp's body (which the SDK re-buffers
// for error responses), or the status text when there is none.
func bodySnippet(status int, resp *http.Response) string {
	if resp != nil && resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if s := strings.TrimSpace(string(b)); s != "" {
			return s
		}
	}
	return http.StatusText(status)
}

// streamErrorMessage extracts error.message from an error event sent in the
// middle of a stream, falling back to the SDK's text.
func streamErrorMessage(e *ssestream.StreamError) string {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(e.Event.Data, &ev) == nil {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(ev.Error, &obj) == nil && obj.Message != "" {
			return "stream error: " + obj.Message
		}
	}
	return e.Error()
}
