package llm

import (
	"strings"

	"github.com/bubbus/bub/pkg/bub"
)

// ParseModel splits a "provider:model" string at the first ':' (as Bub
// does), so "openrouter:meta/llama:free" is provider "openrouter" and model
// "meta/llama:free". The provider is trimmed and lower-cased; the model is
// returned as written. A string without ':' or with an empty side is a
// *bub.Error of kind config.
func ParseModel(s string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(s, ":")
	provider = strings.ToLower(strings.TrimSpace(provider))
	if !ok || provider == "" || strings.TrimSpace(model) == "" {
		return "", "", bub.Errorf(bub.KindConfig, "model %q must have the form provider:model (for example openai:gpt-4o-mini or echo:echo)", s)
	}
	return provider, model, nil
}
