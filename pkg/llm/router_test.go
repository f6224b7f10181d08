package llm_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/echo"
	"github.com/bubbus/bub/pkg/llm/openai"
	"github.com/bubbus/bub/pkg/llm/providers"
)

// noRetries replaces the standard OpenAI factory with one whose SDK does
// not retry, so error cases stay fast.
var noRetries = llm.WithFactory(openai.Factory(openai.WithMaxRetries(0)))

func ask(text string) llm.Call {
	return llm.Call{Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(text)}}}
}

// TestRouterFallback pins Bub's fallback rules with three fake servers as
// providers a, b and c; the default model is a:m with fallbacks b:m, c:m.
func TestRouterFallback(t *testing.T) {
	fail := fakellm.Step{Error: &fakellm.Error{Status: 400, Message: "bad request"}}
	hang := fakellm.Step{Text: "late", Delay: fakellm.Duration(time.Hour)}
	tests := []struct {
		name    string
		model   string // call model; "" = default
		timeout time.Duration
		steps   map[string][]fakellm.Step
		cancel  bool // cancel once provider a received its request
		// want: the answer, or the provider whose error is returned.
		wantText    string
		wantErrFrom string
		wantErr     error
		wantCalls   map[string]int
		wantLogged  bool
	}{
		{
			name: "primary answers", steps: map[string][]fakellm.Step{"a": {{Text: "from a"}}},
			wantText: "from a", wantCalls: map[string]int{"a": 1, "b": 0, "c": 0},
		},
		{
			name: "failure before streaming falls back", steps: map[string][]fakellm.Step{"a": {fail}, "b": {{Text: "from b"}}},
			wantText: "from b", wantCalls: map[string]int{"a": 1, "b": 1, "c": 0}, wantLogged: true,
		},
		{
			name: "all fail: the first error", steps: map[string][]fakellm.Step{"a": {fail}, "b": {fail}, "c": {fail}},
			wantErrFrom: "a", wantCalls: map[string]int{"a": 1, "b": 1, "c": 1}, wantLogged: true,
		},
		{
			name: "failure after streaming does not fall back", steps: map[string][]fakellm.Step{"a": {{Text: "half", StreamError: "cut"}}},
			wantErrFrom: "a", wantCalls: map[string]int{"a": 1, "b": 0, "c": 0},
		},
		{
			name: "explicit default model falls back", model: "a:m", steps: map[string][]fakellm.Step{"a": {fail}},
			wantText: "hello", wantCalls: map[string]int{"a": 1, "b": 1, "c": 0}, wantLogged: true,
		},
		{
			name: "another model has no fallbacks", model: "b:m", steps: map[string][]fakellm.Step{"b": {fail}},
			wantErrFrom: "b", wantCalls: map[string]int{"a": 0, "b": 1, "c": 0},
		},
		{
			name: "timeout before the first byte falls back", timeout: 100 * time.Millisecond,
			steps:    map[string][]fakellm.Step{"a": {hang}},
			wantText: "hello", wantCalls: map[string]int{"a": 1, "b": 1, "c": 0}, wantLogged: true,
		},
		{
			name: "cancellation stops the fallback", cancel: true, steps: map[string][]fakellm.Step{"a": {hang}},
			wantErr: context.Canceled, wantCalls: map[string]int{"a": 1, "b": 0, "c": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakes := map[string]*fakellm.Server{}
			bases := map[string]string{}
			for _, name := range []string{"a", "b", "c"} {
				fakes[name], bases[name] = fakellm.Start(t, fakellm.Script{Steps: tt.steps[name]})
			}
			var logs bytes.Buffer
			r, err := providers.NewRouter(llm.Config{
				Model: "a:m", FallbackModels: []string{"b:m", "c:m"}, APIBases: bases, ModelTimeout: tt.timeout,
			}, noRetries, llm.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				go func() {
					if _, err := fakes["a"].WaitRequests(ctx, 1); err == nil {
						cancel()
					}
				}()
			}
			call := ask("hello")
			call.Model = tt.model
			resp, err := r.Complete(ctx, call, nil)
			switch {
			case tt.wantErr != nil:
				if err != tt.wantErr {
					t.Fatalf("err = %v, want exactly %v", err, tt.wantErr)
				}
			case tt.wantErrFrom != "":
				var be *bub.Error
				if !errors.As(err, &be) || be.Details["provider"] != tt.wantErrFrom {
					t.Fatalf("err = %v, want the error of provider %s", err, tt.wantErrFrom)
				}
			case err != nil || resp.Text != tt.wantText:
				t.Fatalf("Complete = %q, %v; want %q", resp.Text, err, tt.wantText)
			}
			for name, want := range tt.wantCalls {
				if got := len(fakes[name].Requests()); got != want {
					t.Errorf("provider %s got %d requests, want %d", name, got, want)
				}
			}
			if logged := strings.Contains(logs.String(), "trying fallback"); logged != tt.wantLogged {
				t.Errorf("fallback logged = %v, want %v: %s", logged, tt.wantLogged, logs.String())
			}
		})
	}
}

func TestRouterTimeoutError(t *testing.T) {
	_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Text: "late", Delay: fakellm.Duration(time.Hour)}}})
	r, err := providers.NewRouter(llm.Config{Model: "slow:m", APIBases: map[string]string{"slow": base}, ModelTimeout: 50 * time.Millisecond}, noRetries)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Complete(t.Context(), ask("hi"), nil)
	var be *bub.Error
	if !errors.As(err, &be) || be.Kind != bub.KindProvider || !strings.Contains(be.Message, "timed out after 50ms") || be.Details["timeout_seconds"] != 0.05 {
		t.Fatalf("err = %#v, want a provider timeout error", err)
	}
}

// TestRouterRequest checks what reaches the provider: the model id without
// its prefix, the max tokens default, completion args, keys per provider.
func TestRouterRequest(t *testing.T) {
	fakeA, baseA := fakellm.Start(t, fakellm.Script{APIKey: "sk-a"})
	fakeB, baseB := fakellm.Start(t, fakellm.Script{APIKey: "sk-global"})
	r, err := providers.NewRouter(llm.Config{
		Model:          "a:org/model:tag",
		APIKey:         "sk-global",
		APIKeys:        map[string]llm.Secret{"a": "sk-a"},
		APIBases:       map[string]string{"a": baseA, "b": baseB},
		MaxTokens:      100,
		CompletionArgs: map[string]any{"temperature": 0.3, "max_tokens": 1},
	}, noRetries)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		call          llm.Call
		fake          *fakellm.Server
		wantModel     string
		wantMaxTokens float64
	}{
		{name: "defaults", call: ask("x"), fake: fakeA, wantModel: "org/model:tag", wantMaxTokens: 100},
		{name: "explicit", call: llm.Call{Model: "b:other", MaxTokens: 7, Messages: ask("x").Messages}, fake: fakeB, wantModel: "other", wantMaxTokens: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.Complete(t.Context(), tt.call, nil); err != nil {
				t.Fatal(err)
			}
			reqs := tt.fake.Requests()
			f := reqs[len(reqs)-1].Fields
			if f["model"] != tt.wantModel || f["max_tokens"] != tt.wantMaxTokens || f["temperature"] != 0.3 {
				t.Fatalf("request fields = %v", f)
			}
		})
	}
}

func TestRouterEcho(t *testing.T) {
	r, err := providers.NewRouter(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	resp, err := r.Complete(t.Context(), ask("no key needed here"), func(d llm.Delta) { streamed.WriteString(d.Text) })
	if err != nil || resp.Text != "no key needed here" || streamed.String() != resp.Text {
		t.Fatalf("echo = %q (streamed %q), %v", resp.Text, streamed.String(), err)
	}
	if got := r.Config().Model; got != llm.DefaultModel {
		t.Errorf("default model = %q", got)
	}
}

func TestRouterConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     llm.Config
		opts    []llm.RouterOption
		wantErr string
	}{
		{name: "invalid config", cfg: llm.Config{Model: "nocolon"}, wantErr: "provider:model"},
		{name: "vllm without base", cfg: llm.Config{Model: "vllm:qwen"}, wantErr: "BUB_VLLM_API_BASE"},
		{name: "fallback without base", cfg: llm.Config{FallbackModels: []string{"custom:x"}}, wantErr: "BUB_CUSTOM_API_BASE"},
		{name: "duplicate provider", opts: []llm.RouterOption{llm.WithProvider("echo", echo.New())}, wantErr: "registered twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := providers.NewRouter(tt.cfg, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewRouter err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := llm.NewRouter(llm.Config{}); err == nil || !strings.Contains(err.Error(), `no provider registered for "echo"`) {
		t.Errorf("bare router err = %v", err)
	}
}

// TestRouterCallTimeConfigErrors: a missing key or base for a model chosen
// per call is a config error at call time, never a panic.
func TestRouterCallTimeConfigErrors(t *testing.T) {
	r, err := providers.NewRouter(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ model, wantSetting string }{
		{model: "openai:gpt-4o-mini", wantSetting: "BUB_OPENAI_API_KEY"},
		{model: "openrouter:openrouter/free", wantSetting: "BUB_OPENROUTER_API_KEY"},
		{model: "llamacpp:local", wantSetting: "BUB_LLAMACPP_API_BASE"},
		{model: "anthropic:claude-x", wantSetting: "BUB_ANTHROPIC_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			call := ask("hi")
			call.Model = tt.model
			_, err := r.Complete(t.Context(), call, nil)
			var be *bub.Error
			if !errors.As(err, &be) || be.Kind != bub.KindConfig || be.Details["setting"] != tt.wantSetting {
				t.Fatalf("err = %v, want a config error naming %s", err, tt.wantSetting)
			}
		})
	}
}

// named is a provider that answers with its name and the model id.
type named string

func (n named) Complete(_ context.Context, call llm.Call, _ func(llm.Delta)) (llm.Response, error) {
	return llm.Response{Text: string(n) + "/" + call.Model}, nil
}

// namedFactory builds a named provider of label for any config.
func namedFactory(label string) llm.ProviderFactory {
	return func(pc llm.ProviderConfig) (llm.Provider, error) { return named(label + ":" + pc.Provider), nil }
}

// TestRouterProviderFactory: a factory set for one name builds that
// name's provider; every other name keeps the general factory; a later
// one for the same name replaces the earlier.
func TestRouterProviderFactory(t *testing.T) {
	cfg := llm.Config{Model: "special:m", APIBase: "http://127.0.0.1:1"}
	r, err := llm.NewRouter(cfg,
		llm.WithFactory(namedFactory("general")),
		llm.WithProviderFactory("special", namedFactory("first")),
		llm.WithProviderFactory("special", namedFactory("own")),
	)
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]string{"special:m": "own:special/m", "other:x": "general:other/x"} {
		call := ask("hi")
		call.Model = model
		resp, err := r.Complete(t.Context(), call, nil)
		if err != nil || resp.Text != want {
			t.Errorf("%s: %q, %v; want %q", model, resp.Text, err, want)
		}
	}
	// A named factory alone is enough for its name, not for another.
	if _, err := llm.NewRouter(cfg, llm.WithProviderFactory("special", namedFactory("own"))); err != nil {
		t.Errorf("named factory only: %v", err)
	}
	if _, err := llm.NewRouter(llm.Config{Model: "other:x", APIBase: "http://127.0.0.1:1"}, llm.WithProviderFactory("special", namedFactory("own"))); err == nil {
		t.Errorf("a router without a factory for other accepted other:x")
	}
	if _, err := llm.NewRouter(cfg, llm.WithProviderFactory("special", nil)); err == nil {
		t.Errorf("nil factory accepted")
	}
}
