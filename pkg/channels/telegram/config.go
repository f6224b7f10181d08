package telegram

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by [ConfigFromEnv] (Bub's section
// "telegram", prefix BUB_TELEGRAM_).
const (
	EnvToken       = "BUB_TELEGRAM_TOKEN"
	EnvAllowUsers  = "BUB_TELEGRAM_ALLOW_USERS"
	EnvAllowChats  = "BUB_TELEGRAM_ALLOW_CHATS"
	EnvProxy       = "BUB_TELEGRAM_PROXY"
	EnvAPIBase     = "BUB_TELEGRAM_API_BASE"
	EnvPollTimeout = "BUB_TELEGRAM_POLL_TIMEOUT"
)

// DefaultAPIBase is the Bot API server used when [Config.APIBase] is
// empty.
const DefaultAPIBase = "https://api.telegram.org"

// DefaultPollTimeout is the getUpdates long-poll timeout used when
// [Config.PollTimeout] is 0 (Bub's read timeout of 30 s).
const DefaultPollTimeout = 30 * time.Second

// Config configures the Telegram channel. The zero value is a disabled
// channel with the documented defaults.
type Config struct {
	// Token is the bot token; the channel is enabled iff it is not empty.
	Token string
	// AllowUsers, when not empty, lists the user ids and usernames that
	// may talk to the bot; others get "Access denied.".
	AllowUsers []string
	// AllowChats, when not empty, lists the chat ids the bot serves;
	// messages from other chats are dropped silently.
	AllowChats []string
	// Proxy is an optional proxy URL (http, https or socks5) for every
	// call to the Bot API.
	Proxy string
	// APIBase is the Bot API server (DefaultAPIBase when empty).
	APIBase string
	// PollTimeout is the getUpdates long-poll timeout, whole seconds
	// (DefaultPollTimeout when 0).
	PollTimeout time.Duration
}

// Enabled reports whether a token is configured.
func (c Config) Enabled() bool { return c.Token != "" }

// apiBase returns the API base without a trailing slash.
func (c Config) apiBase() string {
	if c.APIBase == "" {
		return DefaultAPIBase
	}
	return strings.TrimRight(c.APIBase, "/")
}

// pollTimeout returns the long-poll timeout.
func (c Config) pollTimeout() time.Duration {
	if c.PollTimeout == 0 {
		return DefaultPollTimeout
	}
	return c.PollTimeout
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if strings.ContainsAny(c.Token, "/?# \t\r\n") {
		errs = append(errs, errors.New("telegram token must not contain '/', '?', '#' or whitespace"))
	}
	if c.APIBase != "" {
		if u, err := url.Parse(c.APIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("telegram api base %q: want an http or https URL", c.APIBase))
		}
	}
	if c.Proxy != "" {
		if u, err := url.Parse(c.Proxy); err != nil || u.Host == "" {
			errs = append(errs, fmt.Errorf("telegram proxy %q: want a URL such as http://host:port or socks5://host:port", c.Proxy))
		}
	}
	if c.PollTimeout < 0 || c.PollTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("telegram poll timeout %v: want whole seconds, 0 for the default", c.PollTimeout))
	}
	return errors.Join(errs...)
}

// ConfigFromEnv reads the BUB_TELEGRAM_* settings through getenv (pass
// os.Getenv) and validates them. Allow lists are comma-separated; the
// poll timeout is a Go duration ("30s") or a number of seconds.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Token:      strings.TrimSpace(getenv(EnvToken)),
		AllowUsers: ParseList(getenv(EnvAllowUsers)),
		AllowChats: ParseList(getenv(EnvAllowChats)),
		Proxy:      strings.TrimSpace(getenv(EnvProxy)),
		APIBase:    strings.TrimSpace(getenv(EnvAPIBase)),
	}
	var errs []error
	if s := strings.TrimSpace(getenv(EnvPollTimeout)); s != "" {
		d, err := parseSeconds(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvPollTimeout, err))
		}
		c.PollTimeout = d
	}
	if err := errors.Join(append(errs, c.Validate())...); err != nil {
		return Config{}, err
	}
	return c, nil
}

func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration nor a number of seconds", s)
	}
	return d, nil
}

// ParseList splits a comma-separated list, trimming every entry and
// dropping empty ones (Bub's allow list parsing).
func ParseList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
