package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// EnvHome names the variable of the bub home directory.
const EnvHome = "BUB_HOME"

// EnvName returns the environment variable of a dotted config key path:
// "BUB_" and the path upper-cased, with every character a shell variable
// name cannot hold ('.', '-', ...) replaced by '_': `model` → BUB_MODEL,
// `telegram.token` → BUB_TELEGRAM_TOKEN, `enabled_channels` →
// BUB_ENABLED_CHANNELS.
func EnvName(path string) string {
	return "BUB_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, path)
}

// providerMaps are the top-level keys whose map value is keyed by provider:
// `api_key: {openai: sk-…}` is BUB_OPENAI_API_KEY (package llm reads
// BUB_<PROVIDER>_API_KEY and BUB_<PROVIDER>_API_BASE).
var providerMaps = []string{"api_key", "api_base"}

// Env returns the BUB_* variables the configuration stands for:
//
//   - a scalar at path a.b_c is BUB_A_B_C as text (booleans true/false);
//   - a list is its elements' text joined with commas;
//   - a map is its JSON object under its own name (BUB_COMPLETION_ARGS) and
//     each of its entries under theirs;
//   - `api_key.<provider>` and `api_base.<provider>` are
//     BUB_<PROVIDER>_API_KEY and BUB_<PROVIDER>_API_BASE (a string
//     api_key is BUB_API_KEY as any scalar);
//   - null values stand for nothing, nor does `home` (the home is where the
//     file was found: --home or BUB_HOME).
//
// When two paths name the same variable, the first in sorted order wins.
func Env(c Config) map[string]string {
	out := map[string]string{}
	for _, k := range sortedKeys(c) {
		v := c[k]
		if m, ok := asMap(v); ok && slices.Contains(providerMaps, k) {
			for _, p := range sortedKeys(m) {
				if s, ok := text(m[p]); ok {
					setOnce(out, EnvName(p+"_"+k), s)
				}
			}
			continue
		}
		flatten(out, k, v)
	}
	delete(out, EnvHome)
	return out
}

func flatten(out map[string]string, path string, v any) {
	if m, ok := asMap(v); ok {
		if data, err := json.Marshal(map[string]any(m)); err == nil {
			setOnce(out, EnvName(path), string(data))
		}
		for _, k := range sortedKeys(m) {
			flatten(out, path+"."+k, m[k])
		}
		return
	}
	if s, ok := text(v); ok {
		setOnce(out, EnvName(path), s)
	}
}

func setOnce(out map[string]string, name, value string) {
	if _, ok := out[name]; !ok {
		out[name] = value
	}
}

// text is the environment form of a scalar or list; false for null.
func text(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case []string:
		return strings.Join(v, ","), true
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			if m, ok := asMap(x); ok {
				data, _ := json.Marshal(map[string]any(m))
				parts = append(parts, string(data))
				continue
			}
			if s, ok := text(x); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, ","), true
	}
	return fmt.Sprint(v), true
}

func sortedKeys(m Config) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Getenv wraps getenv (os.Getenv) so that a variable that is unset or
// empty in the environment takes its value from the configuration (see
// [Env] for the names): with every command reading its settings through
// the result, the precedence is flags > BUB_* environment > config file >
// defaults. An empty variable cannot hide a configured value; remove the
// key from the file instead.
func Getenv(getenv func(string) string, c Config) func(string) string {
	fromFile := Env(c)
	return func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return fromFile[name]
	}
}

// Lookup returns the value of a dotted config path for `${config.x.y}`
// substitution: the variable [EnvName](path) when it is set in the
// environment (as text), else the configuration's value.
func Lookup(getenv func(string) string, c Config) func(path string) (any, bool) {
	return func(path string) (any, bool) {
		if v := getenv(EnvName(path)); v != "" {
			return v, true
		}
		return c.Get(path)
	}
}

// HomeFromArgs returns the bub home a command line names: the value of
// its first --home flag (`--home DIR` or `--home=DIR`, before any `--`),
// else BUB_HOME, else ~/.bub; "" when none is known.
func HomeFromArgs(args []string, getenv func(string) string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--home="); ok {
			return v
		}
		if a == "--home" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return DefaultHome(getenv)
}

// DefaultHome returns BUB_HOME, else ~/.bub; "" when neither is known.
func DefaultHome(getenv func(string) string) string {
	if h := getenv(EnvHome); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".bub")
	}
	return ""
}

// LoadFor loads the configuration file of the home a command line names
// (see [HomeFromArgs]) and returns getenv wrapped by [Getenv], so the
// command sees flags > environment > file > defaults. With no home known
// it returns getenv unchanged and an empty configuration. A file that
// cannot be read or parsed is an error naming it.
func LoadFor(args []string, getenv func(string) string) (func(string) string, Config, error) {
	home := HomeFromArgs(args, getenv)
	if home == "" {
		return getenv, Config{}, nil
	}
	c, err := Load(Path(home))
	if err != nil {
		return getenv, nil, err
	}
	return Getenv(getenv, c), c, nil
}
