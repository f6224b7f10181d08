package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/config"
)

// Environment variables read by [ConfigFromEnv].
const (
	EnvModel          = "BUB_MODEL"
	EnvFallbackModels = "BUB_FALLBACK_MODELS"
	EnvAPIKeyAll      = "BUB_API_KEY"
	EnvAPIBaseAll     = "BUB_API_BASE"
	EnvMaxTokens      = "BUB_MAX_TOKENS"
	EnvModelTimeout   = "BUB_MODEL_TIMEOUT"
	// EnvModelTimeoutSeconds is Bub's name, read when EnvModelTimeout is
	// unset.
	EnvModelTimeoutSeconds = "BUB_MODEL_TIMEOUT_SECONDS"
	EnvCompletionArgs      = "BUB_COMPLETION_ARGS"
)

// envProviders are the providers whose BUB_<PROVIDER>_API_KEY/_API_BASE
// [ConfigFromEnv] always reads, besides those named in BUB_MODEL and
// BUB_FALLBACK_MODELS.
var envProviders = []string{"openai", "openrouter", "ollama", "anthropic", "vllm", "llamacpp", "custom"}

// EnvAPIKey returns the per-provider key variable, e.g. BUB_OPENAI_API_KEY:
// the variable of the config key path <provider>.api_key
// ([config.EnvName]).
func EnvAPIKey(provider string) string { return config.EnvName(provider + ".api_key") }

// EnvAPIBase returns the per-provider base variable, e.g.
// BUB_VLLM_API_BASE.
func EnvAPIBase(provider string) string { return config.EnvName(provider + ".api_base") }

// ConfigFromEnv reads the BUB_* model settings through getenv (pass
// os.Getenv) and validates them. An unset, empty or "null" variable keeps
// the default.
//
//   - BUB_MODEL: "provider:model".
//   - BUB_FALLBACK_MODELS: a comma list or a JSON array of models.
//   - BUB_API_KEY, BUB_API_BASE: used for every provider.
//   - BUB_<PROVIDER>_API_KEY, BUB_<PROVIDER>_API_BASE: per provider; they
//     win over BUB_API_KEY/BUB_API_BASE for that provider. Read for openai,
//     openrouter, ollama, anthropic, vllm, llamacpp, custom and every
//     provider named in BUB_MODEL or BUB_FALLBACK_MODELS.
//   - BUB_MAX_TOKENS: a positive integer.
//   - BUB_MODEL_TIMEOUT (or Bub's BUB_MODEL_TIMEOUT_SECONDS): a Go
//     duration ("90s") or a number of seconds ("90", "1.5").
//   - BUB_COMPLETION_ARGS: a JSON object.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(name string) string {
		v := strings.TrimSpace(getenv(name))
		if v == "null" {
			return ""
		}
		return v
	}
	var (
		c    Config
		errs []error
		err  error
	)
	c.Model = get(EnvModel)
	if c.FallbackModels, err = parseList(get(EnvFallbackModels)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvFallbackModels, err))
	}
	c.APIKey = Secret(get(EnvAPIKeyAll))
	c.APIBase = get(EnvAPIBaseAll)
	for _, p := range envProviderNames(append([]string{c.Model}, c.FallbackModels...)) {
		if key := get(EnvAPIKey(p)); key != "" {
			if c.APIKeys == nil {
				c.APIKeys = map[string]Secret{}
			}
			c.APIKeys[p] = Secret(key)
		}
		if base := get(EnvAPIBase(p)); base != "" {
			if c.APIBases == nil {
				c.APIBases = map[string]string{}
			}
			c.APIBases[p] = base
		}
	}
	if v := get(EnvMaxTokens); v != "" {
		if c.MaxTokens, err = strconv.Atoi(v); err != nil || c.MaxTokens <= 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive integer", EnvMaxTokens, v))
		}
	}
	timeoutVar := EnvModelTimeout
	if get(timeoutVar) == "" {
		timeoutVar = EnvModelTimeoutSeconds
	}
	if v := get(timeoutVar); v != "" {
		if c.ModelTimeout, err = parseTimeout(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", timeoutVar, err))
		}
	}
	if v := get(EnvCompletionArgs); v != "" {
		if err := json.Unmarshal([]byte(v), &c.CompletionArgs); err != nil {
			errs = append(errs, fmt.Errorf("%s: must be a JSON object: %w", EnvCompletionArgs, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// envProviderNames returns envProviders plus the providers of models, in
// order and without duplicates. Unparsable models are skipped here and
// reported by Validate.
func envProviderNames(models []string) []string {
	names := append([]string(nil), envProviders...)
	for _, m := range models {
		if p, _, err := ParseModel(m); err == nil && !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	return names
}

// parseList reads a comma list or a JSON array of strings.
func parseList(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	if strings.HasPrefix(v, "[") {
		var list []string
		if err := json.Unmarshal([]byte(v), &list); err != nil {
			return nil, fmt.Errorf("must be a comma list or a JSON array of strings: %w", err)
		}
		return list, nil
	}
	var list []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			list = append(list, item)
		}
	}
	return list, nil
}

// maxTimeoutSeconds keeps a timeout in seconds within a time.Duration.
const maxTimeoutSeconds = 1e9

// parseTimeout reads a Go duration or a number of seconds.
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(secs) || math.Abs(secs) > maxTimeoutSeconds {
			return 0, fmt.Errorf("%q is neither a duration (90s) nor a number of seconds", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("%q must not be negative", v)
	}
	return d, nil
}
