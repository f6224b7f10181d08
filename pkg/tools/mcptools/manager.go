package mcptools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bubbus/bub/pkg/tools"
)

// State is where a server's connection stands.
type State string

// The server states.
const (
	// StateConnecting: the first connection attempt has not ended yet.
	StateConnecting State = "connecting"
	// StateConnected: a session is up; tool calls go through.
	StateConnected State = "connected"
	// StateDown: the server could not be reached or its session ended; it
	// is being restarted (stdio) or reconnected (HTTP) with backoff, and
	// tool calls fail with an error naming it.
	StateDown State = "down"
	// StateStopped: the manager was closed.
	StateStopped State = "stopped"
)

// Options configure a [Manager]. The zero value of every field means its
// documented default.
type Options struct {
	// Log receives connection changes and the servers' stderr (debug);
	// nil discards. Nothing logged carries a secret of a [Server].
	Log *slog.Logger
	// ConnectTimeout bounds one connection attempt, handshake and tool
	// listing included (15s). [Manager.Start] waits at most this long.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay between reconnection
	// attempts (250ms and 30s): it doubles per failed attempt from
	// MinBackoff up to MaxBackoff, each delay jittered to between half and
	// all of it, and starts over once a connection holds.
	MinBackoff, MaxBackoff time.Duration
	// Version is the client version announced to servers ("dev").
	Version string
}

// Manager keeps a session to each configured MCP server and turns the
// servers' tools into [tools.Tool] values. Build one with [New], call
// [Manager.Start] once, register [Manager.Tools] and [Manager.Close] it on
// shutdown.
type Manager struct {
	opts    Options
	servers []*server // sorted by name
	wg      sync.WaitGroup
	// mu guards cancel.
	mu     sync.Mutex
	cancel context.CancelFunc
}

// New returns a manager of servers (validated; names must be unique). It
// starts nothing.
func New(servers []Server, opts Options) (*Manager, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 15 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	m := &Manager{opts: opts}
	seen := map[string]bool{}
	var errs []error
	for _, cfg := range servers {
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[cfg.Name] {
			errs = append(errs, fmt.Errorf("mcp server %q is configured twice", cfg.Name))
			continue
		}
		seen[cfg.Name] = true
		m.servers = append(m.servers, newServer(cfg, opts))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(m.servers, func(a, b *server) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	return m, nil
}

// Start starts a supervisor per server and waits (at most
// Options.ConnectTimeout, or until ctx ends) until each server's first
// connection attempt ended. A server that is down then is not an error:
// it keeps being retried, but offers no tools to a registry filled now
// (see [Manager.Tools]). Start returns an error only when called twice.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.cancel != nil {
		m.mu.Unlock()
		return errors.New("mcp: manager already started")
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.mu.Unlock()
	for _, s := range m.servers {
		m.wg.Go(func() { s.supervise(run) })
	}
	for _, s := range m.servers {
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// Close stops every server (a stdio server's stdin is closed, then it is
// terminated if it does not exit; an HTTP session is deleted) and waits
// for the supervisors until ctx ends.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	cancel := m.cancel
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: stopping the servers: %w", ctx.Err())
	}
}

// Tools returns the tools of every server that has connected so far, as
// its first session listed them: mcp.<server>_<tool>, sorted by server,
// then in the server's order. A worker calls it (through
// [Manager.Register]) once, right after [Manager.Start], since its tool
// registry is frozen once it serves: a server that was down then
// contributes its tools from the worker's next start on.
func (m *Manager) Tools() []tools.Tool {
	var out []tools.Tool
	for _, s := range m.servers {
		out = append(out, s.bubTools()...)
	}
	return out
}

// Register adds [Manager.Tools] to reg. A tool the registry refuses (a
// name too long, a schema outside the supported subset) is skipped with a
// warning and its reason shows in [Manager.Status]; Register fails only
// on a frozen registry.
func (m *Manager) Register(reg *tools.Registry) error {
	for _, s := range m.servers {
		for _, t := range s.bubTools() {
			err := reg.Register(t)
			if errors.Is(err, tools.ErrRegistryFrozen) {
				return err
			}
			s.setRegistered(t.Name, err)
			if err != nil {
				m.opts.Log.Warn("mcp.tool_skipped", "server", s.cfg.Name, "tool", t.Name, "err", err)
			}
		}
	}
	return nil
}

// ServerStatus is one server as [Manager.Status] reports it; it holds no
// secret.
type ServerStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio or http
	Target    string `json:"target"`    // command line or URL, redacted
	State     State  `json:"state"`
	// Error is why the server is down, "" otherwise.
	Error string `json:"error,omitempty"`
	// Connects counts the sessions opened so far (1 after a clean start).
	Connects int          `json:"connects"`
	Tools    []ToolStatus `json:"tools"`
}

// ToolStatus is one tool of a server.
type ToolStatus struct {
	// Name is the runtime name (mcp.<server>_<tool>); MCPName the
	// server's own name of it.
	Name    string       `json:"name"`
	MCPName string       `json:"mcp_name"`
	Effect  tools.Effect `json:"effect"`
	// Skipped says why the tool registry refused it, "" when it did not.
	Skipped     string `json:"skipped,omitempty"`
	Description string `json:"description,omitempty"`
}

// Status returns every server's state and tools, sorted by name.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}

// server is one configured server and its supervisor's view of it.
type server struct {
	cfg    Server
	opts   Options
	client *mcp.Client
	log    *slog.Logger
	hide   *strings.Replacer       // replaces the server's secrets in any text
	ready  chan struct{}           // closed when the first attempt ended
	kick   chan *mcp.ClientSession // a session a call saw fail (cap 1)

	// mu guards the fields below.
	mu       sync.Mutex
	state    State
	session  *mcp.ClientSession
	reason   string      // why the server is down
	listed   []*mcp.Tool // the tools of the first session (what is registered)
	skipped  map[string]string
	connects int
}

func newServer(cfg Server, opts Options) *server {
	var pairs []string
	for _, v := range cfg.secrets() {
		pairs = append(pairs, v, redacted)
	}
	return &server{
		cfg:     cfg,
		opts:    opts,
		client:  mcp.NewClient(&mcp.Implementation{Name: "bub", Version: opts.Version}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}),
		log:     opts.Log.With("mcp_server", cfg.Name),
		hide:    strings.NewReplacer(pairs...),
		ready:   make(chan struct{}),
		kick:    make(chan *mcp.ClientSession, 1),
		state:   StateConnecting,
		skipped: map[string]string{},
	}
}

// supervise connects, waits for the session to end, and reconnects with
// backoff until ctx ends.
func (s *server) supervise(ctx context.Context) {
	defer s.setState(StateStopped, "")
	for failures := 0; ; {
		cs, listed, err := s.connect(ctx)
		s.up(cs, listed, err)
		select {
		case <-s.ready:
		default:
			close(s.ready) // the first attempt ended (only supervise closes it)
		}
		if err == nil {
			failures = 0
			s.log.Info("mcp.connected", "server", s.cfg, "tools", len(listed))
			err = s.await(ctx, cs)
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, errBroken) { // broken recorded the call's reason
				s.setState(StateDown, "session ended: "+s.hide.Replace(err.Error()))
			}
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		delay := s.backoff(failures)
		s.log.Warn("mcp.down", "reason", s.downReason(), "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// backoff returns the jittered delay after the nth failure in a row.
func (s *server) backoff(n int) time.Duration {
	d := s.opts.MinBackoff
	for i := 1; i < n && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.opts.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// connect opens a session and lists the server's tools.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, []*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	cs, err := s.client.Connect(ctx, s.transport(), nil)
	if err != nil {
		return nil, nil, err
	}
	var listed []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			_ = cs.Close()
			return nil, nil, fmt.Errorf("listing tools: %w", err)
		}
		listed = append(listed, t)
	}
	return cs, listed, nil
}

// errBroken is await's answer when a call found the session broken.
var errBroken = errors.New("a tool call found the connection broken")

// await returns when the session ends (the process exited, the HTTP
// session failed), a call saw it fail, or ctx ends, and closes cs.
func (s *server) await(ctx context.Context, cs *mcp.ClientSession) error {
	var wg sync.WaitGroup
	ended := make(chan error, 1)
	wg.Go(func() { ended <- cs.Wait() }) // returns once cs is closed at the latest
	defer wg.Wait()
	defer func() { _ = cs.Close() }()
	for {
		select {
		case err := <-ended:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return err
		case broken := <-s.kick:
			if broken == cs {
				return errBroken
			} // else about an earlier session
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *server) transport() mcp.Transport {
	if s.cfg.URL != "" {
		return &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: headers{base: http.DefaultTransport, set: s.cfg.Headers}},
		}
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = serverEnv(os.Getenv, s.cfg.Env)
	cmd.Stderr = stderrLog{log: s.log, hide: s.hide}
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// baseEnv are the variables of the worker a stdio server inherits.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LC_ALL"}

func serverEnv(getenv func(string) string, extra map[string]string) []string {
	var env []string
	for _, k := range baseEnv {
		if _, set := extra[k]; !set {
			if v := getenv(k); v != "" {
				env = append(env, k+"="+v)
			}
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// headers sets the configured headers on every request of an HTTP server.
type headers struct {
	base http.RoundTripper
	set  map[string]string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// stderrLog logs what a stdio server writes to stderr, secrets hidden.
type stderrLog struct {
	log  *slog.Logger
	hide *strings.Replacer
}

func (w stderrLog) Write(p []byte) (int, error) {
	w.log.Debug("mcp.stderr", "text", w.hide.Replace(strings.TrimRight(string(p), "\n")))
	return len(p), nil
}

// up records the outcome of a connection attempt.
func (s *server) up(cs *mcp.ClientSession, listed []*mcp.Tool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.state, s.reason = StateDown, s.hide.Replace(err.Error())
		return
	}
	s.state, s.session, s.reason = StateConnected, cs, ""
	if s.connects++; s.connects == 1 {
		s.listed = listed // what Tools registers; later sessions keep it
	}
}

func (s *server) setState(st State, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.reason, s.session = st, reason, nil
}

func (s *server) downReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// current returns the live session, or nil and why there is none.
func (s *server) current() (*mcp.ClientSession, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		reason := s.reason
		if reason == "" {
			reason = string(s.state)
		}
		return nil, reason
	}
	return s.session, ""
}

// broken marks cs failed after a call saw a transport error and wakes the
// supervisor, which reconnects.
func (s *server) broken(cs *mcp.ClientSession, err error) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	reason := "call failed: " + s.hide.Replace(err.Error())
	if s.session == cs {
		s.state, s.session, s.reason = StateDown, nil, reason
		select {
		case <-s.kick: // a kick about an earlier session nobody took
		default:
		}
		s.kick <- cs // room for it: senders hold mu, and the slot is empty
	}
	return reason
}

func (s *server) setRegistered(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.skipped[name] = err.Error()
	} else {
		delete(s.skipped, name)
	}
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{Name: s.cfg.Name, Transport: s.cfg.Transport(), Target: s.cfg.Target(), State: s.state, Connects: s.connects, Tools: []ToolStatus{}}
	if s.state == StateDown {
		st.Error = s.reason
	}
	for _, t := range s.listed {
		name := toolName(s.cfg.Name, t.Name)
		st.Tools = append(st.Tools, ToolStatus{Name: name, MCPName: t.Name, Effect: Effect(t.Annotations), Skipped: s.skipped[name], Description: description(t)})
	}
	return st
}
