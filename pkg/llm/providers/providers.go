package providers

import (
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/anthropic"
	"github.com/bubbus/bub/pkg/llm/echo"
	"github.com/bubbus/bub/pkg/llm/openai"
)

// NewRouter returns an [llm.Router] for cfg with the echo model registered
// as "echo", the Anthropic provider for "anthropic" and the
// OpenAI-compatible provider for every other name. opts are applied after
// these, so an llm.WithFactory in opts replaces the OpenAI factory (for
// example to set openai.WithMaxRetries or an HTTP client), an
// llm.WithProviderFactory for "anthropic" replaces the Anthropic one, and
// llm.WithProvider adds providers.
func NewRouter(cfg llm.Config, opts ...llm.RouterOption) (*llm.Router, error) {
	std := []llm.RouterOption{
		llm.WithProvider(echo.Name, echo.New()),
		llm.WithProviderFactory(anthropic.Name, anthropic.Factory()),
		llm.WithFactory(openai.Factory()),
	}
	return llm.NewRouter(cfg, append(std, opts...)...)
}
