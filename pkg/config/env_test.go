package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/llm"
)

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestEnvName(t *testing.T) {
	for path, want := range map[string]string{
		"model":                        "BUB_MODEL",
		"api_key":                      "BUB_API_KEY",
		"telegram.token":               "BUB_TELEGRAM_TOKEN",
		"enabled_channels":             "BUB_ENABLED_CHANNELS",
		"a.b_c":                        "BUB_A_B_C",
		"interceptor.audit-v2.timeout": "BUB_INTERCEPTOR_AUDIT_V2_TIMEOUT",
	} {
		if got := config.EnvName(path); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestEnvForms(t *testing.T) {
	c := config.Config{
		"model":            "openai:gpt-4o",
		"api_key":          map[string]any{"openai": "sk-o", "OpenRouter": "sk-r"},
		"api_base":         map[string]any{"vllm": "http://127.0.0.1:8000/v1"},
		"enabled_channels": []any{"telegram", "cli"},
		"stream_output":    false,
		"max_tokens":       uint64(2048),
		"temperature":      0.25,
		"fallback_models":  nil,
		"telegram":         map[string]any{"token": "tg", "allow_users": []any{1, 2}},
		"completion_args":  map[string]any{"top_p": 0.5},
		"home":             "/elsewhere",
	}
	want := map[string]string{
		"BUB_MODEL":                 "openai:gpt-4o",
		"BUB_OPENAI_API_KEY":        "sk-o",
		"BUB_OPENROUTER_API_KEY":    "sk-r",
		"BUB_VLLM_API_BASE":         "http://127.0.0.1:8000/v1",
		"BUB_ENABLED_CHANNELS":      "telegram,cli",
		"BUB_STREAM_OUTPUT":         "false",
		"BUB_MAX_TOKENS":            "2048",
		"BUB_TEMPERATURE":           "0.25",
		"BUB_TELEGRAM":              `{"allow_users":[1,2],"token":"tg"}`,
		"BUB_TELEGRAM_TOKEN":        "tg",
		"BUB_TELEGRAM_ALLOW_USERS":  "1,2",
		"BUB_COMPLETION_ARGS":       `{"top_p":0.5}`,
		"BUB_COMPLETION_ARGS_TOP_P": "0.5",
	}
	if got := config.Env(c); !reflect.DeepEqual(got, want) {
		t.Errorf("Env =\n%v\nwant\n%v", got, want)
	}
}

// TestPrecedence: a flag beats BUB_* in the environment, which beats the
// config file, which beats the default.
func TestPrecedence(t *testing.T) {
	file := config.Config{"model": "echo:file", "log_level": "debug"}
	tests := []struct {
		name string
		file config.Config
		env  map[string]string
		args []string
		want string
	}{
		{"default", nil, nil, nil, "info"},
		{"file beats default", file, nil, nil, "debug"},
		{"env beats file", file, map[string]string{"BUB_LOG_LEVEL": "error"}, nil, "error"},
		{"flag beats env", file, map[string]string{"BUB_LOG_LEVEL": "error"}, []string{"--log-level=warn"}, "warn"},
		{"flag beats file", file, nil, []string{"--log-level=warn"}, "warn"},
		{"empty env keeps file", file, map[string]string{"BUB_LOG_LEVEL": ""}, nil, "debug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := config.Getenv(mapEnv(tt.env), tt.file)
			var common cli.Common // every command binds its flags like this
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			common.Bind(fs, getenv)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if common.LogLevel != tt.want {
				t.Errorf("log level = %q, want %q", common.LogLevel, tt.want)
			}
		})
	}
}

// TestProviderMapsReachLLM is behaviour check 77 through the overlay: a
// provider map in the file is BUB_<PROVIDER>_API_KEY (lower-cased provider
// in llm.Config), BUB_API_KEY with a BUB_OPENAI_API_BASE gives a string
// key and a base map, and the environment beats the file.
func TestProviderMapsReachLLM(t *testing.T) {
	t.Run("file provider map", func(t *testing.T) {
		c := config.Config{"model": "openai:gpt-4o", "api_key": map[string]any{"OpenAI": "sk-file", "openrouter": "sk-or"}}
		cfg, err := llm.ConfigFromEnv(config.Getenv(mapEnv(nil), c))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]llm.Secret{"openai": "sk-file", "openrouter": "sk-or"}
		if cfg.Model != "openai:gpt-4o" || !reflect.DeepEqual(cfg.APIKeys, want) || cfg.APIKey != "" {
			t.Errorf("llm config = model %q keys %v key %q; want the file's provider map", cfg.Model, redactedKeys(cfg.APIKeys), cfg.APIKey)
		}
	})
	t.Run("string key and base map", func(t *testing.T) {
		c := config.Config{"api_key": "sk-all", "api_base": map[string]any{"openai": "http://127.0.0.1:9/v1"}}
		cfg, err := llm.ConfigFromEnv(config.Getenv(mapEnv(nil), c))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.APIKey != "sk-all" || cfg.APIKeys != nil || !reflect.DeepEqual(cfg.APIBases, map[string]string{"openai": "http://127.0.0.1:9/v1"}) {
			t.Errorf("llm config = key set %v keys %v bases %v", cfg.APIKey != "", redactedKeys(cfg.APIKeys), cfg.APIBases)
		}
	})
	t.Run("env beats file", func(t *testing.T) {
		c := config.Config{"model": "echo:file", "api_key": map[string]any{"openai": "sk-file"}}
		env := mapEnv(map[string]string{"BUB_MODEL": "openai:gpt-4o", "BUB_OPENAI_API_KEY": "sk-env"})
		cfg, err := llm.ConfigFromEnv(config.Getenv(env, c))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Model != "openai:gpt-4o" || cfg.APIKeys["openai"] != "sk-env" {
			t.Errorf("llm config = model %q, env key used %v; want the environment's", cfg.Model, cfg.APIKeys["openai"] == "sk-env")
		}
	})
}

func redactedKeys(m map[string]llm.Secret) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLookup is the config half of behaviour check 76: ${config.x.y}
// reads the YAML value, and BUB_X_Y overrides it.
func TestLookup(t *testing.T) {
	c := config.Config{"telegram": map[string]any{"token": "from-yaml"}}
	look := config.Lookup(mapEnv(nil), c)
	if v, ok := look("telegram.token"); !ok || v != "from-yaml" {
		t.Errorf("Lookup = %v, %v; want from-yaml", v, ok)
	}
	if _, ok := look("telegram.missing"); ok {
		t.Error("Lookup(missing) found something")
	}
	look = config.Lookup(mapEnv(map[string]string{"BUB_TELEGRAM_TOKEN": "from-env"}), c)
	if v, ok := look("telegram.token"); !ok || v != "from-env" {
		t.Errorf("Lookup with BUB_TELEGRAM_TOKEN = %v, %v; want from-env", v, ok)
	}
}

func TestHomeFromArgs(t *testing.T) {
	userHome, _ := os.UserHomeDir()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"run", "--home", "/h1", "hi"}, map[string]string{"BUB_HOME": "/env"}, "/h1"},
		{[]string{"run", "--home=/h2", "hi"}, nil, "/h2"},
		{[]string{"run", "hi"}, map[string]string{"BUB_HOME": "/env"}, "/env"},
		{[]string{"run", "--", "--home", "/no"}, map[string]string{"BUB_HOME": "/env"}, "/env"},
		{[]string{"run", "--home"}, map[string]string{"BUB_HOME": "/env"}, "/env"},
		{nil, nil, filepath.Join(userHome, ".bub")},
	}
	for _, tt := range tests {
		if got := config.HomeFromArgs(tt.args, mapEnv(tt.env)); got != tt.want {
			t.Errorf("HomeFromArgs(%q, %v) = %q, want %q", tt.args, tt.env, got, tt.want)
		}
	}
}

func TestLoadFor(t *testing.T) {
	home := t.TempDir()
	if err := config.Save(config.Path(home), config.Config{"model": "echo:file", "home": "/ignored"}); err != nil {
		t.Fatal(err)
	}
	getenv, c, err := config.LoadFor([]string{"run", "--home", home, "hi"}, mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c["model"] != "echo:file" || getenv("BUB_MODEL") != "echo:file" {
		t.Errorf("LoadFor: config %v, BUB_MODEL %q", c, getenv("BUB_MODEL"))
	}
	if got := getenv("BUB_HOME"); got != "" {
		t.Errorf("BUB_HOME from the file = %q, want nothing (the home is where the file was found)", got)
	}
	if err := os.WriteFile(config.Path(home), []byte("model: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := config.LoadFor([]string{"--home=" + home}, mapEnv(nil)); err == nil || !strings.Contains(err.Error(), config.Path(home)) {
		t.Errorf("LoadFor(broken file) = %v, want an error naming it", err)
	}
}
