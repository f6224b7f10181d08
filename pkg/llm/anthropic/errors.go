package anthropic

import (
	"errors"
	"net/http"
	"strings"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// maxErrorBody bounds how much of a non-JSON error body becomes the message.
const maxErrorBody = 512

// providerError turns a failed call into a *bub.Error of kind provider,
// with the details of package llm/openai's errors: provider, model,
// message (the API's own text) and, when the API answered, type (its
// error type, e.g. rate_limit_error) and request_id; status_code when it
// answered with an error status. An "error" event in the middle of a
// stream has no status_code; its message starts with "stream error: ".
// Anthropic's context-overflow message ("prompt is too long: … tokens >
// … maximum") is kept as is, so the agent's auto-handoff recognises it.
func (p *Provider) providerError(model string, err error) *bub.Error {
	details := map[string]any{}
	var (
		apiErr *asdk.Error
		status int
		msg    = err.Error()
	)
	if errors.As(err, &apiErr) {
		msg = apiErr.Message
		if t := apiErr.Type(); t != "" {
			details["type"] = string(t)
		}
		if apiErr.RequestID != "" {
			details["request_id"] = apiErr.RequestID
		}
		if apiErr.StatusCode >= http.StatusBadRequest {
			status = apiErr.StatusCode
		}
		if msg == "" {
			// No Anthropic error object (HTML from a proxy, ...).
			msg = bodySnippet(apiErr.RawJSON(), apiErr.StatusCode)
		}
		if status == 0 {
			msg = "stream error: " + msg
		}
	}
	return llm.ProviderError(p.name, model, status, msg, details)
}

// bodySnippet returns the start of an error body, or the status text when
// it is empty.
func bodySnippet(body string, status int) string {
	body = strings.TrimSpace(body)
	if len(body) > maxErrorBody {
		body = strings.ToValidUTF8(body[:maxErrorBody], "")
	}
	if body == "" {
		return http.StatusText(status)
	}
	return body
}
