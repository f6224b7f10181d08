package llm

import (
	"fmt"

	"github.com/bubbus/bub/pkg/bub"
)

// ProviderError is the error every provider returns for a failed call: a
// *bub.Error of kind provider reading "provider P model M: HTTP S: msg"
// ("provider P model M: msg" when status is 0, e.g. a connection error or
// an error in the middle of a stream). details (may be nil) holds the
// provider's own fields (type, code, request_id, …); provider, model,
// message and, with a status, status_code are added to it.
func ProviderError(provider, model string, status int, msg string, details map[string]any) *bub.Error {
	if details == nil {
		details = map[string]any{}
	}
	details["provider"], details["model"], details["message"] = provider, model, msg
	text := msg
	if status != 0 {
		details["status_code"] = status
		text = fmt.Sprintf("HTTP %d: %s", status, msg)
	}
	return &bub.Error{
		Kind:    bub.KindProvider,
		Message: fmt.Sprintf("provider %s model %s: %s", provider, model, text),
		Details: details,
	}
}
