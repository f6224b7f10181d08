package remote

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/hooks"
)

// DefaultTimeout bounds one interceptor call when [Config.Timeout] is 0.
const DefaultTimeout = 2 * time.Second

// Policy says what a failed interceptor call (no responders, timeout,
// malformed reply, remote error) does to the call it guards.
type Policy string

// The failure policies.
const (
	// FailOpen, the default, is Bub's rule for a failing hook: the failure
	// is logged and the interceptor skipped. Agent-loop hooks and on_error get an error
	// the registry logs and isolates; the other hooks get "no opinion",
	// except for an error the interceptor itself returned, which follows
	// the hook's rule exactly as a local plugin's error would.
	FailOpen Policy = "open"
	// FailClosed makes a security policy impossible to bypass by crashing
	// or stopping it: before_tool_call denies the call with a message that
	// names the service, before_llm_call aborts the call ([hooks.ErrAbort]),
	// every other hook returns the error.
	FailClosed Policy = "closed"
)

// ParsePolicy parses "open" or "closed" (case-insensitive).
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(strings.ToLower(strings.TrimSpace(s))); p {
	case FailOpen, FailClosed:
		return p, nil
	}
	return "", fmt.Errorf("failure policy %q: want open or closed", s)
}

// Config configures one remote interceptor. The zero value of every field
// but Service means its documented default.
type Config struct {
	// Service is the interceptor service's name (its NATS micro name and
	// the <service> token of bub.hook.<service>.<hook>): letters, digits,
	// '-' and '_'.
	Service string
	// Timeout bounds each call (DefaultTimeout when 0); the caller's
	// deadline, when earlier, wins.
	Timeout time.Duration
	// Failure is the failure policy (FailOpen when empty).
	Failure Policy
	// Hooks, when set, are the hooks the service serves; otherwise they are
	// discovered from the service's NATS micro info when the plugin starts.
	// Listing them lets a fail-closed interceptor guard calls even while
	// no instance is running.
	Hooks []hooks.Hook
}

// serviceName is NATS micro's service name rule.
var serviceName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidateService checks an interceptor service name: NATS micro's name
// rule (letters, digits, '-' and '_'), which also makes it one subject
// token.
func ValidateService(name string) error {
	if !serviceName.MatchString(name) {
		return fmt.Errorf("interceptor service name %q: want letters, digits, '-' and '_' only", name)
	}
	return nil
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if err := ValidateService(c.Service); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want a positive duration", c.Timeout))
	}
	if c.Failure != "" {
		if _, err := ParsePolicy(string(c.Failure)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range c.Hooks {
		if !Serves(h) {
			errs = append(errs, fmt.Errorf("hook %q is not one an interceptor can serve (%s)", h, hookList()))
		}
	}
	return errors.Join(errs...)
}

// withDefaults returns c with its defaults filled in.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Failure == "" {
		c.Failure = FailOpen
	}
	c.Hooks = slices.Clone(c.Hooks)
	return c
}

func hookList() string {
	names := make([]string, len(served))
	for i, h := range served {
		names[i] = string(h)
	}
	return strings.Join(names, ", ")
}

// EnvInterceptors names the interceptor services, comma-separated, in
// registration order (the last has the highest priority).
const EnvInterceptors = "BUB_INTERCEPTORS"

// EnvTimeout is the variable of a service's call timeout, a Go duration:
// BUB_INTERCEPTOR_<SERVICE>_TIMEOUT.
func EnvTimeout(service string) string { return envPrefix(service) + "TIMEOUT" }

// EnvFailure is the variable of a service's failure policy, open or
// closed: BUB_INTERCEPTOR_<SERVICE>_FAILURE.
func EnvFailure(service string) string { return envPrefix(service) + "FAILURE" }

// EnvHooks is the variable listing a service's hooks, comma-separated:
// BUB_INTERCEPTOR_<SERVICE>_HOOKS.
func EnvHooks(service string) string { return envPrefix(service) + "HOOKS" }

// envPrefix is "BUB_INTERCEPTOR_<SERVICE>_" with the service upper-cased
// and '-' replaced by '_'.
func envPrefix(service string) string {
	return "BUB_INTERCEPTOR_" + strings.ToUpper(strings.ReplaceAll(service, "-", "_")) + "_"
}

// ConfigsFromEnv reads the remote interceptors from the environment
// through getenv (pass os.Getenv): BUB_INTERCEPTORS lists the services in
// registration order, and per service BUB_INTERCEPTOR_<SERVICE>_TIMEOUT
// (e.g. 500ms), _FAILURE (open or closed) and _HOOKS (e.g.
// before_tool_call,after_tool_call) override the defaults. <SERVICE> is
// the name upper-cased with '-' as '_'. It returns every problem at once.
func ConfigsFromEnv(getenv func(string) string) ([]Config, error) {
	var (
		out  []Config
		errs []error
		seen = map[string]string{} // env prefix → service
	)
	for name := range strings.SplitSeq(getenv(EnvInterceptors), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if prev, dup := seen[envPrefix(name)]; dup {
			errs = append(errs, fmt.Errorf("%s: %q and %q share the variables %s*", EnvInterceptors, prev, name, envPrefix(name)))
			continue
		}
		seen[envPrefix(name)] = name
		c, err := configFromEnv(getenv, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: interceptor %q: %w", EnvInterceptors, name, err))
			continue
		}
		out = append(out, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func configFromEnv(getenv func(string) string, name string) (Config, error) {
	c := Config{Service: name}
	errs := []error{ValidateService(name)}
	if v := strings.TrimSpace(getenv(EnvTimeout(name))); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as 500ms", EnvTimeout(name), v))
		}
		c.Timeout = max(d, 0)
	}
	if v := getenv(EnvFailure(name)); strings.TrimSpace(v) != "" {
		p, err := ParsePolicy(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvFailure(name), err))
		}
		c.Failure = p
	}
	for h := range strings.SplitSeq(getenv(EnvHooks(name)), ",") {
		switch h = strings.TrimSpace(h); {
		case h == "":
		case !Serves(hooks.Hook(h)):
			errs = append(errs, fmt.Errorf("%s: hook %q is not one an interceptor can serve (%s)", EnvHooks(name), h, hookList()))
		default:
			c.Hooks = append(c.Hooks, hooks.Hook(h))
		}
	}
	return c, errors.Join(errs...)
}
