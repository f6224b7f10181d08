package builtin_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/config/prompt"
	"github.com/bubbus/bub/pkg/hooks"
)

// recorder answers from a map (else the default) and records every
// question it was shown.
type recorder struct {
	answers map[string]string
	abortAt string
	asked   []hooks.Question
}

func (r *recorder) Ask(_ context.Context, q hooks.Question) (string, error) {
	r.asked = append(r.asked, q)
	if q.Key == r.abortAt {
		return "", prompt.ErrAborted
	}
	if v, ok := r.answers[q.Key]; ok {
		return v, nil
	}
	return q.Default, nil
}

func (r *recorder) prompts() []string {
	var out []string
	for _, q := range r.asked {
		out = append(out, q.Prompt)
	}
	return out
}

func TestOnboardConfig(t *testing.T) {
	tests := []struct {
		name    string
		current map[string]any
		answers map[string]string
		want    map[string]any
		prompts []string
	}{
		{
			name:    "defaults are Bub's model",
			want:    map[string]any{"model": "openrouter:openrouter/free"},
			prompts: []string{"LLM provider", "LLM model", "API key (optional)", "API base (optional)"},
		},
		{
			name:    "current model split at the first colon",
			current: map[string]any{"model": "ollama:llama3.2:3b"},
			want:    map[string]any{"model": "ollama:llama3.2:3b"},
		},
		{
			name:    "current model without a provider",
			current: map[string]any{"model": "gpt-4o"},
			want:    map[string]any{"model": "openrouter:gpt-4o"},
		},
		{
			name:    "provider and model",
			answers: map[string]string{"provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-x", "api_base": "http://127.0.0.1:9/v1"},
			want:    map[string]any{"model": "openai:gpt-4o-mini", "api_key": "sk-x", "api_base": "http://127.0.0.1:9/v1"},
		},
		{
			name:    "a whole model string",
			answers: map[string]string{"model": "echo:onboarded"},
			want:    map[string]any{"model": "echo:onboarded"},
		},
		{
			name:    "a model with a colon of the chosen provider",
			answers: map[string]string{"provider": "ollama", "model": "llama3.2:3b"},
			want:    map[string]any{"model": "ollama:llama3.2:3b"},
		},
		{
			name:    "custom provider",
			answers: map[string]string{"provider": "custom", "custom_provider": "groq", "model": "llama-3.1-8b", "api_base": "https://api.groq.com/openai/v1"},
			want:    map[string]any{"model": "groq:llama-3.1-8b", "api_base": "https://api.groq.com/openai/v1"},
			prompts: []string{"LLM provider", "Custom provider", "LLM model", "API key (optional)", "API base (optional)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{answers: tt.answers}
			got, err := newPlugin(t, builtin.Options{}).OnboardConfig(t.Context(), hooks.OnboardConfigInput{Current: tt.current, Prompter: r})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fragment = %v, want %v", got, tt.want)
			}
			if tt.prompts != nil && !reflect.DeepEqual(r.prompts(), tt.prompts) {
				t.Errorf("prompts = %q, want %q", r.prompts(), tt.prompts)
			}
			for _, q := range r.asked {
				if q.Secret != (q.Key == builtin.OnboardKeyAPIKey) {
					t.Errorf("question %s secret = %v", q.Key, q.Secret)
				}
			}
		})
	}
}

func TestOnboardConfigProviderChoices(t *testing.T) {
	r := &recorder{}
	if _, err := newPlugin(t, builtin.Options{}).OnboardConfig(t.Context(), hooks.OnboardConfigInput{Current: map[string]any{"model": "groq:x"}, Prompter: r}); err != nil {
		t.Fatal(err)
	}
	q := r.asked[0]
	want := []string{"openrouter", "openai", "ollama", "anthropic", "vllm", "llamacpp", "echo", "groq", "custom"}
	if q.Default != "groq" || !reflect.DeepEqual(q.Choices, want) {
		t.Errorf("provider question default %q choices %v; want groq and %v", q.Default, q.Choices, want)
	}
}

// TestOnboardConfigAbortAtAPIKey is the plugin half of behaviour check 89:
// aborted at the API-key prompt, it fails and asks nothing more.
func TestOnboardConfigAbortAtAPIKey(t *testing.T) {
	r := &recorder{abortAt: builtin.OnboardKeyAPIKey}
	got, err := newPlugin(t, builtin.Options{}).OnboardConfig(t.Context(), hooks.OnboardConfigInput{Prompter: r})
	if !errors.Is(err, prompt.ErrAborted) || got != nil {
		t.Fatalf("OnboardConfig = %v, %v; want ErrAborted", got, err)
	}
	if want := []string{"LLM provider", "LLM model", "API key (optional)"}; !reflect.DeepEqual(r.prompts(), want) {
		t.Errorf("prompts = %q, want %q", r.prompts(), want)
	}
}

func TestOnboardConfigRejectsBadAnswers(t *testing.T) {
	for name, answers := range map[string]map[string]string{
		"empty model":         {"provider": "openai", "model": ""},
		"provider with colon": {"provider": "a:b"},
		"empty custom":        {"provider": "custom", "custom_provider": ""},
	} {
		if _, err := newPlugin(t, builtin.Options{}).OnboardConfig(t.Context(), hooks.OnboardConfigInput{Prompter: &recorder{answers: answers}}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := newPlugin(t, builtin.Options{}).OnboardConfig(t.Context(), hooks.OnboardConfigInput{}); err == nil {
		t.Error("no prompter: no error")
	}
}
