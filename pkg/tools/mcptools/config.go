package mcptools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// EnvServers names the variable that configures the MCP servers: a JSON
// object of server name to [Server]. The config file's `mcp.servers`
// mapping stands for it (package config maps a map at path mcp.servers to
// BUB_MCP_SERVERS as JSON).
const EnvServers = "BUB_MCP_SERVERS"

// MaxConfigSize bounds the text [ParseServers] decodes.
const MaxConfigSize = 1 << 20

// redacted replaces a secret in every text form of a [Server].
const redacted = "[redacted]"

// Server configures one MCP server: either a stdio command (Command, Args,
// Env) or a streamable-HTTP endpoint (URL, Headers). Env and header values
// are secrets: no text form of a Server shows them (see
// [Server.Redacted]), nor does any error or status of a [Manager].
type Server struct {
	// Name is the server's key in the configuration: letters, digits, '-'
	// and '_' (its tools are mcp.<name>_<tool>).
	Name string `json:"-"`
	// Command runs a stdio server; Args are its arguments.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is set for the command on top of a minimal environment (PATH,
	// HOME, USER, LOGNAME, SHELL, TERM, TMPDIR, TZ, LANG, LC_ALL): the
	// worker's own variables, model keys among them, never reach a server.
	Env map[string]string `json:"env,omitempty"`
	// URL is a streamable-HTTP endpoint (http or https); Headers are sent
	// with every request (e.g. Authorization).
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// serverName is what a server name may look like: one token of a tool name.
var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Transport returns "stdio" or "http".
func (s Server) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// Validate reports every problem of s.
func (s Server) Validate() error {
	var errs []error
	if !serverName.MatchString(s.Name) {
		errs = append(errs, fmt.Errorf("server name %q: want 1 to 32 letters, digits, '-' and '_'", s.Name))
	}
	switch {
	case s.Command == "" && s.URL == "":
		errs = append(errs, errors.New("set command (stdio) or url (streamable HTTP)"))
	case s.Command != "" && s.URL != "":
		errs = append(errs, errors.New("command and url exclude each other"))
	case s.Command != "":
		if len(s.Headers) > 0 {
			errs = append(errs, errors.New("headers need url (a stdio server gets env)"))
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				errs = append(errs, fmt.Errorf("env name %q: want a non-empty name without '='", k))
			}
		}
	default:
		if len(s.Args) > 0 || len(s.Env) > 0 {
			errs = append(errs, errors.New("args and env need command (an HTTP server gets headers)"))
		}
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("url %q: want an http:// or https:// URL", s.redactedURL()))
		}
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			if !headerName.MatchString(k) {
				errs = append(errs, fmt.Errorf("header name %q is not a valid HTTP field name", k))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mcp server %q: %w", s.Name, err)
	}
	return nil
}

// Redacted returns a copy of s whose env and header values, and any
// password in the URL, read "[redacted]".
func (s Server) Redacted() Server {
	r := s
	r.Args = slices.Clone(s.Args)
	r.Env = redactValues(s.Env)
	r.Headers = redactValues(s.Headers)
	r.URL = s.redactedURL()
	return r
}

func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = redacted
	}
	return out
}

func (s Server) redactedURL() string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return redacted // unparseable: it may hold anything
	}
	return u.Redacted()
}

// Target returns what the server is reached by: the command line, or the
// URL without its password.
func (s Server) Target() string {
	if s.URL != "" {
		return s.redactedURL()
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

// String describes s without its secrets.
func (s Server) String() string {
	r := s.Redacted()
	out := r.Name + " (" + r.Transport() + " " + r.Target()
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		out += " env " + k
	}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		out += " header " + k
	}
	return out + ")"
}

// Format prints [Server.String] for every fmt verb, so not even %#v shows
// a secret.
func (s Server) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// MarshalJSON encodes the redacted server (name included): no JSON of a
// Server carries a secret either. [ParseServers] reads the configuration.
func (s Server) MarshalJSON() ([]byte, error) {
	type plain Server // without the methods
	r := s.Redacted()
	return json.Marshal(struct {
		Name string `json:"name"`
		plain
	}{r.Name, plain(r)})
}

// LogValue implements [slog.LogValuer] with the redacted server.
func (s Server) LogValue() slog.Value { return slog.StringValue(s.String()) }

// minSecret is the length from which a secret is also replaced inside
// texts that come from the server (errors, stderr, tool results): a short
// value ("1", "true") is no credential, and replacing it would garble
// every text that happens to contain it.
const minSecret = 8

// secrets returns the values no text about the server may show: env and
// header values and a URL password, of at least minSecret bytes.
func (s Server) secrets() []string {
	var out []string
	add := func(v string) {
		if len(v) >= minSecret {
			out = append(out, v)
		}
	}
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			add(v)
		}
	}
	if u, err := url.Parse(s.URL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// text is a configuration scalar: a JSON string, number or boolean read
// as its text (YAML writes `PORT: 8080` as a number).
type text string

func (t *text) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*t = text(s)
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v.(type) {
	case float64, bool:
		*t = text(bytes.TrimSpace(data))
		return nil
	}
	return errors.New("want a string, number or boolean") // never quote the value: it may be a secret
}

// serverJSON is the wire form of a Server.
type serverJSON struct {
	Command text            `json:"command"`
	Args    []text          `json:"args"`
	Env     map[string]text `json:"env"`
	URL     text            `json:"url"`
	Headers map[string]text `json:"headers"`
}

// ParseServers decodes the JSON object of [EnvServers] (server name to
// {command, args, env} or {url, headers}) and returns the servers sorted
// by name. Blank text means none. Unknown fields, values of the wrong
// type and invalid servers are errors, every problem at once; no error
// shows a secret.
func ParseServers(data []byte) ([]Server, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", EnvServers, MaxConfigSize)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON object of server name to server: %w", EnvServers, syntaxOnly(err))
	}
	var (
		out  []Server
		errs []error
	)
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		var w serverJSON
		dec := json.NewDecoder(bytes.NewReader(raw[name]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&w); err != nil {
			errs = append(errs, fmt.Errorf("mcp server %q: %w", name, syntaxOnly(err)))
			continue
		}
		s := Server{Name: name, Command: string(w.Command), URL: string(w.URL), Env: texts(w.Env), Headers: texts(w.Headers)}
		for _, a := range w.Args {
			s.Args = append(s.Args, string(a))
		}
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvServers, err)
	}
	return out, nil
}

func texts(m map[string]text) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// syntaxOnly keeps a decoding error's position and kind but drops any
// value it quotes (a JSON type error names the field, never the value;
// a syntax error quotes at most one character), so secrets stay out.
func syntaxOnly(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at offset %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %q: want %s, not a JSON %s", te.Field, te.Type, te.Value)
	}
	return err
}

// ServersFromEnv reads the servers from [EnvServers] through getenv (the
// config-file overlay's getenv, so `mcp.servers` in config.yaml counts).
func ServersFromEnv(getenv func(string) string) ([]Server, error) {
	return ParseServers([]byte(getenv(EnvServers)))
}
