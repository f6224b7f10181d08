package llm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

func TestParseModel(t *testing.T) {
	tests := []struct {
		in, provider, model string
		wantErr             bool
	}{
		{in: "openai:gpt-4o", provider: "openai", model: "gpt-4o"},
		{in: "openrouter:openrouter/free", provider: "openrouter", model: "openrouter/free"},
		{in: "ollama:qwen3:8b", provider: "ollama", model: "qwen3:8b"}, // first ':' only
		{in: " OpenAI :gpt", provider: "openai", model: "gpt"},
		{in: "echo:echo", provider: "echo", model: "echo"},
		{in: "gpt-4o", wantErr: true},
		{in: ":gpt", wantErr: true},
		{in: "openai:", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, m, err := llm.ParseModel(tt.in)
			if tt.wantErr {
				var be *bub.Error
				if !errors.As(err, &be) || be.Kind != bub.KindConfig {
					t.Fatalf("err = %v, want a config *bub.Error", err)
				}
				return
			}
			if err != nil || p != tt.provider || m != tt.model {
				t.Fatalf("ParseModel = %q, %q, %v; want %q, %q", p, m, err, tt.provider, tt.model)
			}
		})
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    llm.Config
		wantErr []string
	}{
		{name: "empty is the zero config", env: map[string]string{}, want: llm.Config{}},
		{
			name: "everything",
			env: map[string]string{
				"BUB_MODEL":             "openrouter:openrouter/free",
				"BUB_FALLBACK_MODELS":   " openai:gpt-4o-mini, ,myhost:llama ",
				"BUB_API_KEY":           "sk-all",
				"BUB_API_BASE":          "https://proxy.example/v1",
				"BUB_OPENAI_API_KEY":    "sk-openai",
				"BUB_MYHOST_API_BASE":   "http://10.0.0.2:8000/v1",
				"BUB_MAX_TOKENS":        "4096",
				"BUB_MODEL_TIMEOUT":     "90s",
				"BUB_COMPLETION_ARGS":   `{"temperature": 0.1}`,
				"BUB_UNRELATED_API_KEY": "not read: no model names unrelated",
			},
			want: llm.Config{
				Model:          "openrouter:openrouter/free",
				FallbackModels: []string{"openai:gpt-4o-mini", "myhost:llama"},
				APIKey:         "sk-all",
				APIKeys:        map[string]llm.Secret{"openai": "sk-openai"},
				APIBase:        "https://proxy.example/v1",
				APIBases:       map[string]string{"myhost": "http://10.0.0.2:8000/v1"},
				MaxTokens:      4096,
				ModelTimeout:   90 * time.Second,
				CompletionArgs: map[string]any{"temperature": 0.1},
			},
		},
		{
			// Behaviour check 77: per-provider variables build maps keyed by
			// the lower-cased provider.
			name: "per-provider maps",
			env: map[string]string{
				"BUB_OPENAI_API_KEY":     "k1",
				"BUB_OPENROUTER_API_KEY": "k2",
				"BUB_VLLM_API_BASE":      "http://127.0.0.1:8000/v1",
			},
			want: llm.Config{
				APIKeys:  map[string]llm.Secret{"openai": "k1", "openrouter": "k2"},
				APIBases: map[string]string{"vllm": "http://127.0.0.1:8000/v1"},
			},
		},
		{
			name: "api key string with a base map",
			env:  map[string]string{"BUB_API_KEY": "k", "BUB_OPENAI_API_BASE": "https://o.example/v1"},
			want: llm.Config{APIKey: "k", APIBases: map[string]string{"openai": "https://o.example/v1"}},
		},
		{
			name: "null, JSON list and Bub's timeout name",
			env: map[string]string{
				"BUB_MODEL": "null", "BUB_COMPLETION_ARGS": "null",
				"BUB_FALLBACK_MODELS":       `["a:b", "c:d"]`,
				"BUB_MODEL_TIMEOUT_SECONDS": "1.5",
				"BUB_A_API_KEY":             "ka",
			},
			want: llm.Config{FallbackModels: []string{"a:b", "c:d"}, ModelTimeout: 1500 * time.Millisecond, APIKeys: map[string]llm.Secret{"a": "ka"}},
		},
		{
			name: "every error at once",
			env: map[string]string{
				"BUB_FALLBACK_MODELS": `["a:b"`,
				"BUB_MAX_TOKENS":      "-3",
				"BUB_MODEL_TIMEOUT":   "soon",
				"BUB_COMPLETION_ARGS": "[1]",
			},
			wantErr: []string{"BUB_FALLBACK_MODELS", "BUB_MAX_TOKENS", "BUB_MODEL_TIMEOUT", "BUB_COMPLETION_ARGS"},
		},
		{
			name:    "validation",
			env:     map[string]string{"BUB_MODEL": "gpt-4o", "BUB_FALLBACK_MODELS": "x", "BUB_API_BASE": "not a url"},
			wantErr: []string{"model:", "fallback_models[0]", "api_base"},
		},
		{name: "NaN timeout", env: map[string]string{"BUB_MODEL_TIMEOUT": "NaN"}, wantErr: []string{"BUB_MODEL_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := llm.ConfigFromEnv(env(tt.env))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ConfigFromEnv: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("config =\n%#v\nwant\n%#v", fields(got), fields(tt.want))
			}
		})
	}
}

// fields shows a config's fields (Config's own formatting hides them).
func fields(c llm.Config) string {
	keys := map[string]string{}
	for p, k := range c.APIKeys {
		keys[p] = string(k)
	}
	return fmt.Sprintf("model=%q fallbacks=%q key=%q keys=%v base=%q bases=%v max=%d timeout=%s args=%v",
		c.Model, c.FallbackModels, string(c.APIKey), keys, c.APIBase, c.APIBases, c.MaxTokens, c.ModelTimeout, c.CompletionArgs)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     llm.Config
		wantErr string
	}{
		{name: "zero", cfg: llm.Config{}},
		{name: "upper-case map key", cfg: llm.Config{APIKeys: map[string]llm.Secret{"OpenAI": "k"}}, wantErr: "api_keys"},
		{name: "bad base in map", cfg: llm.Config{APIBases: map[string]string{"vllm": "localhost:8000"}}, wantErr: "api_bases[vllm]"},
		{name: "negative max tokens", cfg: llm.Config{MaxTokens: -1}, wantErr: "max_tokens"},
		{name: "negative timeout", cfg: llm.Config{ModelTimeout: -time.Second}, wantErr: "model_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if got := (llm.Config{}).WithDefaults(); got.Model != llm.DefaultModel || got.MaxTokens != llm.DefaultMaxTokens {
		t.Errorf("WithDefaults = %s", got)
	}
}

func TestProviderConfig(t *testing.T) {
	cfg := llm.Config{
		APIKey:         "sk-all",
		APIKeys:        map[string]llm.Secret{"openrouter": "sk-or"},
		APIBases:       map[string]string{"vllm": "http://gpu:8000/v1"},
		CompletionArgs: map[string]any{"top_p": 1.0},
	}
	tests := []struct {
		name     string
		cfg      llm.Config
		provider string
		wantBase string
		wantKey  llm.Secret
		wantErr  string // a config *bub.Error naming this setting
	}{
		{name: "openai default base, global key", cfg: cfg, provider: "openai", wantBase: llm.OpenAIBaseURL, wantKey: "sk-all"},
		{name: "per-provider key wins", cfg: cfg, provider: "openrouter", wantBase: llm.OpenRouterBaseURL, wantKey: "sk-or"},
		{name: "per-provider base", cfg: cfg, provider: "vllm", wantBase: "http://gpu:8000/v1", wantKey: "sk-all"},
		{name: "ollama needs no key", cfg: llm.Config{}, provider: "ollama", wantBase: llm.OllamaBaseURL},
		{name: "vllm needs a base", cfg: llm.Config{}, provider: "vllm", wantErr: "BUB_VLLM_API_BASE"},
		{name: "llamacpp needs a base", cfg: llm.Config{}, provider: "llamacpp", wantErr: "BUB_LLAMACPP_API_BASE"},
		{name: "custom needs a base", cfg: llm.Config{}, provider: "custom", wantErr: "BUB_CUSTOM_API_BASE"},
		{name: "hosted needs a key", cfg: llm.Config{}, provider: "openrouter", wantErr: "BUB_OPENROUTER_API_KEY"},
		{name: "global base replaces defaults, no key needed", cfg: llm.Config{APIBase: "http://local/v1"}, provider: "openai", wantBase: "http://local/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := tt.cfg.ProviderConfig(tt.provider)
			if tt.wantErr != "" {
				var be *bub.Error
				if !errors.As(err, &be) || be.Kind != bub.KindConfig || !strings.Contains(be.Message, tt.wantErr) || be.Details["setting"] != tt.wantErr {
					t.Fatalf("err = %#v, want a config error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || pc.Provider != tt.provider || pc.BaseURL != tt.wantBase || pc.APIKey != tt.wantKey {
				t.Fatalf("ProviderConfig = %+v (key %q), %v; want base %q key %q", pc, string(pc.APIKey), err, tt.wantBase, tt.wantKey)
			}
			if !reflect.DeepEqual(pc.CompletionArgs, tt.cfg.CompletionArgs) {
				t.Errorf("completion args = %v", pc.CompletionArgs)
			}
		})
	}
}

// TestRedaction checks no text form of a config shows a secret.
func TestRedaction(t *testing.T) {
	cfg := llm.Config{
		Model:          "openai:gpt",
		APIKey:         "sk-SECRET-1",
		APIKeys:        map[string]llm.Secret{"openai": "sk-SECRET-2"},
		APIBase:        "https://user:SECRET-3@proxy.example/v1?token=SECRET-4",
		APIBases:       map[string]string{"vllm": "http://u:SECRET-5@gpu/v1"},
		CompletionArgs: map[string]any{"extra_headers": "SECRET-6"},
	}
	var texts []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		texts = append(texts, fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, &cfg), fmt.Sprintf(verb, cfg.APIKey), fmt.Sprintf(verb, cfg.APIKeys))
	}
	texts = append(texts, cfg.String())
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("config", "llm", cfg, "key", cfg.APIKey)
		texts = append(texts, buf.String())
	}
	js, err := json.Marshal(struct {
		Key  llm.Secret
		Keys map[string]llm.Secret
	}{cfg.APIKey, cfg.APIKeys})
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, string(js))
	for _, text := range texts {
		if strings.Contains(text, "SECRET") {
			t.Errorf("secret leaked: %s", text)
		}
	}
	// The redacted view still tells an operator what is configured.
	for _, want := range []string{"model=openai:gpt", "api_key=[redacted]", "api_keys=[openai]", "max_tokens=16384", "completion_args=[extra_headers]", "proxy.example"} {
		if !strings.Contains(cfg.String(), want) {
			t.Errorf("String() = %q lacks %q", cfg.String(), want)
		}
	}
	if got := llm.Secret("").String(); got != "" {
		t.Errorf("empty secret prints %q", got)
	}
}
