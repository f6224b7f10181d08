package bubcmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/config/prompt"
	"github.com/bubbus/bub/pkg/hooks"
)

// tokenPlugin onboards a telegram token, as a channel plugin would.
type tokenPlugin struct{}

func (tokenPlugin) Name() string { return "tokens" }

func (tokenPlugin) OnboardConfig(ctx context.Context, in hooks.OnboardConfigInput) (map[string]any, error) {
	tok, err := in.Prompter.Ask(ctx, hooks.Question{Key: "telegram.token", Prompt: "Telegram bot token", Secret: true})
	if err != nil || tok == "" {
		return nil, err
	}
	return map[string]any{"telegram": map[string]any{"token": tok}}, nil
}

// TestOnboardPlugin: a plugin's fragment is asked after the builtin's
// and merged into the same file.
func TestOnboardPlugin(t *testing.T) {
	home := t.TempDir()
	out, err := runOnboardWith(t, []hooks.Plugin{tokenPlugin{}}, "", "--home", home, "--non-interactive", "--set", "model=echo:x", "--set", "telegram.token=123:abc")
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	if strings.Contains(out, "123:abc") {
		t.Errorf("the token was printed:\n%s", out)
	}
	if got, want := readFile(t, config.Path(home)), "model: echo:x\ntelegram:\n  token: 123:abc\n"; got != want {
		t.Errorf("config.yaml = %q, want %q", got, want)
	}
}

// runOnboard runs `bub onboard` in-process with stdin and returns its
// stdout and error.
func runOnboard(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	return runOnboardWith(t, nil, stdin, args...)
}

// runOnboardWith runs `bub onboard` with the builtin and plugins.
func runOnboardWith(t *testing.T, plugins []hooks.Plugin, stdin string, args ...string) (string, error) {
	t.Helper()
	env := &Env{Env: service.Env{Getenv: func(string) string { return "" }, Plugins: plugins}}
	reg, err := env.startupRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := newOnboard(env.Getenv, reg.Startup().OnboardConfig)
	var out bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestOnboardNonInteractive(t *testing.T) {
	home := t.TempDir()
	path := config.Path(home)
	// The old file is not read: only the collected keys remain.
	if err := os.WriteFile(path, []byte("stale: true\nmodel: old:one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runOnboard(t, "", "--home", home, "--non-interactive", "--set", "model=echo:onboarded", "--set", "api_key=sk-cmd-secret")
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	if !strings.Contains(out, "onboarding") || !strings.Contains(out, "Saved config to "+path) {
		t.Errorf("output lacks the banner or the saved line:\n%s", out)
	}
	if strings.Contains(out, "sk-cmd-secret") {
		t.Errorf("the API key was printed:\n%s", out)
	}
	if got, want := readFile(t, path), "model: echo:onboarded\napi_key: sk-cmd-secret\n"; got != want {
		t.Errorf("config.yaml = %q, want %q", got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode())
	}
}

func TestOnboardInteractive(t *testing.T) {
	home := t.TempDir()
	out, err := runOnboard(t, "openai\ngpt-4o-mini\nsk-typed-secret\n\n", "--home", home)
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	for _, p := range []string{"LLM provider", "LLM model", "API key (optional)", "API base (optional)"} {
		if !strings.Contains(out, p) {
			t.Errorf("prompt %q not shown:\n%s", p, out)
		}
	}
	if strings.Contains(out, "sk-typed-secret") {
		t.Errorf("the API key was printed:\n%s", out)
	}
	if got, want := readFile(t, config.Path(home)), "model: openai:gpt-4o-mini\napi_key: sk-typed-secret\n"; got != want {
		t.Errorf("config.yaml = %q, want %q", got, want)
	}
}

// TestOnboardAbortAtAPIKey is behaviour check 89: the input ends at the
// API-key prompt, so the command fails, asks nothing more and leaves the
// file untouched.
func TestOnboardAbortAtAPIKey(t *testing.T) {
	home := t.TempDir()
	for _, existing := range []bool{false, true} {
		path := config.Path(home)
		if existing {
			if err := os.WriteFile(path, []byte("model: kept:one\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, err := runOnboard(t, "openai\ngpt-4o\n", "--home", home)
		if !errors.Is(err, prompt.ErrAborted) || !strings.Contains(err.Error(), "nothing was saved") {
			t.Fatalf("onboard = %v, want ErrAborted saying nothing was saved", err)
		}
		if strings.Contains(out, "API base") || strings.Contains(out, "Saved config") {
			t.Errorf("went on after the abort:\n%s", out)
		}
		data, rerr := os.ReadFile(path)
		switch {
		case !existing && !errors.Is(rerr, os.ErrNotExist):
			t.Errorf("a config file was written: %q %v", data, rerr)
		case existing && string(data) != "model: kept:one\n":
			t.Errorf("the existing file changed to %q", data)
		}
	}
}

func TestOnboardAnswersFromStdin(t *testing.T) {
	home := t.TempDir()
	out, err := runOnboard(t, "# secrets stay out of argv\napi_key=sk-stdin\nmodel=gpt-4o\n", "--home", home, "--answers", "-", "--set", "provider=openai")
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	if got, want := readFile(t, config.Path(home)), "model: openai:gpt-4o\napi_key: sk-stdin\n"; got != want {
		t.Errorf("config.yaml = %q, want %q", got, want)
	}
}

func TestOnboardFailures(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--non-interactive", "--set", "modle=echo:x"}, "no question has the key modle"},
		{"bad pair", []string{"--non-interactive", "--set", "sk-no-equals"}, "--set #1"},
		{"missing answers file", []string{"--answers", "/nonexistent/answers"}, "--answers"},
		{"bad answer", []string{"--non-interactive", "--set", "provider=a:b"}, "LLM provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			_, err := runOnboard(t, "", append([]string{"--home", home}, tt.args...)...)
			if err == nil || !strings.HasPrefix(err.Error(), "Onboarding failed: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("onboard = %v, want \"Onboarding failed: …%s…\"", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-no-equals") {
				t.Errorf("the error quotes the argument: %v", err)
			}
			if _, err := os.Stat(config.Path(home)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a config file was written after a failure")
			}
		})
	}
}
