package builtin

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/bubbus/bub/pkg/hooks"
)

var _ hooks.ConfigOnboarder = (*Plugin)(nil)

// OnboardProviders returns the "LLM provider" choices of onboarding, the
// providers package llm/providers runs: openrouter, openai and ollama
// (OpenAI-compatible with a default API base), anthropic (the native
// Messages API, package llm/anthropic), vllm and llamacpp
// (OpenAI-compatible, an API base is needed), echo (the built-in key-less
// model) and custom (ask for the name of any other OpenAI-compatible
// provider). Bub's gemini, azure, bedrock, groq, mistral and deepseek are
// not listed: they run here only through an OpenAI-compatible API base, as
// a custom provider.
func OnboardProviders() []string {
	return []string{"openrouter", "openai", "ollama", "anthropic", "vllm", "llamacpp", "echo", "custom"}
}

// Onboarding question keys. The provider questions' answers are not
// stored under their keys: they make up the model string.
const (
	OnboardKeyProvider       = "provider"
	OnboardKeyCustomProvider = "custom_provider"
	OnboardKeyModel          = "model"
	OnboardKeyAPIKey         = "api_key"
	OnboardKeyAPIBase        = "api_base"
)

// Bub's default model, the onboarding default when nothing is configured.
const (
	defaultProvider = "openrouter"
	defaultModel    = "openrouter/free"
)

// OnboardConfig asks, in order, "LLM provider" (default: the provider of
// the current model, split at its first ':'; openrouter when there is
// none), "Custom provider" (only for custom), "LLM model", "API key
// (optional)" (secret) and "API base (optional)", and returns
// {model: "<provider>:<model>", api_key?, api_base?} with the optional
// keys only when answered. A model answer that already starts with a
// listed provider or the chosen one and a ':' ("echo:onboarded") is taken
// as the whole model string, so `--set model=openai:gpt-4o` works; any
// other answer ("llama3.2:3b") is the model of the chosen provider. It
// never prints an answer. Channels and stream output are not asked.
func (p *Plugin) OnboardConfig(ctx context.Context, in hooks.OnboardConfigInput) (map[string]any, error) {
	if in.Prompter == nil {
		return nil, errors.New("builtin: onboarding needs a prompter")
	}
	ask := func(q hooks.Question) (string, error) { return in.Prompter.Ask(ctx, q) }

	curProvider, curModel := defaultProvider, defaultModel
	if m, _ := in.Current["model"].(string); m != "" {
		if prov, model, ok := strings.Cut(m, ":"); ok {
			curProvider, curModel = prov, model
		} else {
			curModel = m
		}
	}
	known := OnboardProviders()
	choices := known
	if !slices.Contains(choices, curProvider) {
		choices = slices.Insert(slices.Clone(known), len(known)-1, curProvider)
	}
	provider, err := ask(hooks.Question{Key: OnboardKeyProvider, Prompt: "LLM provider", Default: curProvider, Choices: choices})
	if err != nil {
		return nil, err
	}
	if provider == "custom" {
		if provider, err = ask(hooks.Question{Key: OnboardKeyCustomProvider, Prompt: "Custom provider", Default: "custom"}); err != nil {
			return nil, err
		}
	}
	if provider == "" || strings.Contains(provider, ":") {
		return nil, errors.New("LLM provider: want a provider name without ':'")
	}
	modelDefault := ""
	if provider == curProvider {
		modelDefault = curModel
	}
	model, err := ask(hooks.Question{Key: OnboardKeyModel, Prompt: "LLM model", Default: modelDefault})
	if err != nil {
		return nil, err
	}
	if model == "" {
		return nil, errors.New("LLM model: an answer is required")
	}
	if prefix, _, ok := strings.Cut(model, ":"); !ok || (prefix != provider && !slices.Contains(known, prefix)) {
		model = provider + ":" + model
	}
	apiKey, err := ask(hooks.Question{Key: OnboardKeyAPIKey, Prompt: "API key (optional)", Secret: true})
	if err != nil {
		return nil, err
	}
	apiBase, err := ask(hooks.Question{Key: OnboardKeyAPIBase, Prompt: "API base (optional)"})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"model": model}
	if apiKey != "" {
		out["api_key"] = apiKey
	}
	if apiBase != "" {
		out["api_base"] = apiBase
	}
	return out, nil
}
