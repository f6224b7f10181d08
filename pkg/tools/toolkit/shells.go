package toolkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrShellsClosed reports a shell start after [Shells.Close].
var ErrShellsClosed = errors.New("shells closed")

// ErrNoShell reports a command where neither bash nor sh exists.
var ErrNoShell = errors.New("neither bash nor sh is installed")

// Defaults of a [Shells] manager.
const (
	defaultTermGrace  = 3 * time.Second // SIGTERM to SIGKILL (Bub's bash.kill)
	defaultDrainGrace = 1 * time.Second // exit to giving up on output a leftover child holds open
	defaultMaxOutput  = 16 << 20        // bytes of output kept per shell
	truncatedNote     = "\n[output truncated: %d bytes dropped]"
)

// Shells runs the processes of the bash tools and tracks them by id
// ("bash-<8 hex>"), each tagged with the session that started it. Each
// shell runs in its own process group, so terminating it also stops the
// commands it started. A worker creates one Shells, passes it to
// [Register] in [Options], and calls [Shells.Close] when it shuts down.
// It is safe for concurrent use.
type Shells struct {
	shell      string   // path of bash, else sh
	env        []string // default: the worker's environment without secrets (ScrubEnv)
	secrets    []string // values redacted from command output
	termGrace  time.Duration
	drainGrace time.Duration
	maxOutput  int

	router ShellRouter // nil: shells are local to this process

	wg sync.WaitGroup // reader and waiter goroutines of every shell

	mu     sync.Mutex
	shells map[string]*shell
	closed bool
}

// ShellsOption configures [NewShells].
type ShellsOption func(*Shells) error

// WithShell runs commands with the given shell binary ("<shell> -c <cmd>")
// instead of bash (or sh when bash is missing).
func WithShell(path string) ShellsOption {
	return func(s *Shells) error {
		p, err := exec.LookPath(path)
		if err != nil {
			return fmt.Errorf("shell %q: %w", path, err)
		}
		s.shell = p
		return nil
	}
}

// WithEnv gives every command exactly env ("KEY=value" entries) instead of
// the worker's environment without its secrets (see [ScrubEnv]).
func WithEnv(env []string) ShellsOption {
	return func(s *Shells) error {
		s.env = append([]string{}, env...)
		return nil
	}
}

// WithMaxOutput caps the output kept per shell (default 16 MiB); later
// output is dropped and a note says how much.
func WithMaxOutput(bytes int) ShellsOption {
	return func(s *Shells) error {
		if bytes <= 0 {
			return fmt.Errorf("max output must be positive, not %d", bytes)
		}
		s.maxOutput = bytes
		return nil
	}
}

// ShellRouter reaches the background shells of other workers of a
// cluster: each worker claims the ids of the background shells it starts,
// and bash.output or bash.kill of an id this worker does not hold is
// routed to the worker that claimed it. Set it with [WithRouter].
type ShellRouter interface {
	// Claim records that this worker owns the background shell id.
	Claim(ctx context.Context, id string) error
	// Release drops this worker's claim of id (the shell is gone).
	Release(ctx context.Context, id string)
	// Route runs op ([ShellOutput] or [ShellKill]) with args on the worker
	// that claimed args' shell_id and returns what it answered; found is
	// false when no other worker claims the shell. An owner that is gone
	// is an error that says so.
	Route(ctx context.Context, op string, args map[string]any) (text string, found bool, err error)
}

// Operations of [ShellRouter.Route] and [Shells.Local].
const (
	ShellOutput = "output" // bash.output
	ShellKill   = "kill"   // bash.kill
)

// WithRouter reaches the background shells of other workers through r
// (see [ShellRouter]).
func WithRouter(r ShellRouter) ShellsOption {
	return func(s *Shells) error {
		s.router = r
		return nil
	}
}

// NewShells returns an empty manager that runs commands with bash (sh when
// bash is missing). Commands get the worker's environment without the
// variables that hold secrets ([ScrubEnv]), and the values of those
// variables are replaced by "[redacted]" in every output a tool returns
// (a command could still read them, e.g. from /proc/<ppid>/environ).
func NewShells(opts ...ShellsOption) (*Shells, error) {
	env, secrets := ScrubEnv(os.Environ())
	s := &Shells{
		env:        env,
		secrets:    secrets,
		termGrace:  defaultTermGrace,
		drainGrace: defaultDrainGrace,
		maxOutput:  defaultMaxOutput,
		shells:     map[string]*shell{},
	}
	for _, name := range []string{"bash", "sh"} {
		if p, err := exec.LookPath(name); err == nil {
			s.shell = p
			break
		}
	}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			return nil, fmt.Errorf("new shells: %w", err)
		}
	}
	// Without a shell (a FROM scratch container) the manager still works:
	// each command fails with ErrNoShell, the rest of the worker runs.
	return s, nil
}

// shell is one started command.
type shell struct {
	id      string
	session string
	pid     int
	out     *output
	reader  *os.File      // read end of the output pipe
	claimed bool          // the router holds this worker's claim (guarded by Shells.mu)
	exited  chan struct{} // closed once the process was reaped; code is set
	drained chan struct{} // closed once the reader stopped
	code    int           // exit code, -N when killed by signal N
}

func (sh *shell) hasExited() bool {
	select {
	case <-sh.exited:
		return true
	default:
		return false
	}
}

// start runs cmd in cwd ("" = the worker's directory) for session.
func (s *Shells) start(cmd, cwd, session string) (*shell, error) {
	if s.shell == "" {
		return nil, ErrNoShell
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start shell: %w", err)
	}
	c := exec.Command(s.shell, "-c", cmd)
	c.Dir, c.Env = cwd, s.env
	c.Stdout, c.Stderr = w, w // one pipe: stdout and stderr in read order
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		r.Close()
		w.Close()
		return nil, ErrShellsClosed
	}
	err = c.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start shell: %w", err)
	}
	sh := &shell{
		id:      s.newID(),
		session: session,
		pid:     c.Process.Pid,
		out:     &output{max: s.maxOutput},
		reader:  r,
		exited:  make(chan struct{}),
		drained: make(chan struct{}),
	}
	s.shells[sh.id] = sh
	s.wg.Go(func() {
		_, _ = io.Copy(sh.out, r) // ends at EOF, or when finalize closes r
		close(sh.drained)
	})
	s.wg.Go(func() {
		_ = c.Wait() // the exit status is read from ProcessState
		sh.code = exitCode(c.ProcessState)
		close(sh.exited)
	})
	return sh, nil
}

// newID returns an unused "bash-<8 hex>"; s.mu must be held.
func (s *Shells) newID() string {
	for {
		b := make([]byte, 4)
		_, _ = rand.Read(b) // crypto/rand.Read never fails
		id := "bash-" + hex.EncodeToString(b)
		if _, taken := s.shells[id]; !taken {
			return id
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ps.ExitCode()
}

// get returns the shell with id, or the error "unknown shell id: <id>".
func (s *Shells) get(id string) (*shell, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.shells[id]
	if !ok {
		return nil, fmt.Errorf("unknown shell id: %s", id)
	}
	return sh, nil
}

// forget drops the shell from the manager (and the router's claim).
func (s *Shells) forget(sh *shell) {
	s.mu.Lock()
	delete(s.shells, sh.id)
	s.mu.Unlock()
	s.release(sh)
}

// claim records this worker as the owner of a background shell.
func (s *Shells) claim(ctx context.Context, sh *shell) error {
	if s.router == nil {
		return nil
	}
	if err := s.router.Claim(ctx, sh.id); err != nil {
		return err
	}
	s.mu.Lock()
	sh.claimed = true
	s.mu.Unlock()
	return nil
}

// release drops the router's claims of the shells.
func (s *Shells) release(shells ...*shell) {
	for _, sh := range shells {
		s.mu.Lock()
		claimed := sh.claimed
		sh.claimed = false
		s.mu.Unlock()
		if claimed {
			s.router.Release(context.Background(), sh.id)
		}
	}
}

// has reports whether this manager holds the shell id.
func (s *Shells) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.shells[id]
	return ok
}

// Local runs op ([ShellOutput] or [ShellKill]) with args on this
// manager's own shells only: what a worker answers for the shells it owns
// when another routes a call to it.
func (s *Shells) Local(op string, args map[string]any) (string, error) {
	switch op {
	case ShellOutput:
		return bashOutput(s, args)
	case ShellKill:
		return killBash(s, stringArg(args, "shell_id"))
	}
	return "", fmt.Errorf("unknown shell operation %q: want %s or %s", op, ShellOutput, ShellKill)
}

// call runs op on the shell args names: here when this manager holds it,
// else on the worker the router says owns it.
func (s *Shells) call(ctx context.Context, op string, args map[string]any) (string, error) {
	if s.router != nil && !s.has(stringArg(args, "shell_id")) {
		text, found, err := s.router.Route(ctx, op, args)
		if found {
			return text, err
		}
	}
	return s.Local(op, args)
}

// finalize waits for an exited shell's output: until the pipe closes, or
// at most the drain grace when a leftover child still holds it open.
func (s *Shells) finalize(sh *shell) {
	<-sh.exited
	t := time.NewTimer(s.drainGrace)
	defer t.Stop()
	select {
	case <-sh.drained:
	case <-t.C:
	}
	sh.reader.Close()
	<-sh.drained
}

// terminate stops the shells' process groups (SIGTERM, then SIGKILL after
// the grace period for those still running) and finalizes them.
func (s *Shells) terminate(shells ...*shell) {
	signal := func(sig syscall.Signal) {
		for _, sh := range shells {
			if !sh.hasExited() {
				// The group, and the shell itself should it have left it.
				// ESRCH only means it exited meanwhile.
				_ = syscall.Kill(-sh.pid, sig)
				_ = syscall.Kill(sh.pid, sig)
			}
		}
	}
	signal(syscall.SIGTERM)
	deadline := time.NewTimer(s.termGrace)
	defer deadline.Stop()
	for _, sh := range shells {
		select {
		case <-sh.exited:
		case <-deadline.C:
			signal(syscall.SIGKILL)
			<-sh.exited
		}
	}
	for _, sh := range shells {
		s.finalize(sh)
	}
}

// TerminateSession terminates and forgets every shell the session started
// and returns how many there were.
func (s *Shells) TerminateSession(session string) int {
	var mine []*shell
	s.mu.Lock()
	for id, sh := range s.shells {
		if sh.session == session {
			mine = append(mine, sh)
			delete(s.shells, id)
		}
	}
	s.mu.Unlock()
	s.terminate(mine...)
	s.release(mine...)
	return len(mine)
}

// Len returns the number of shells the manager tracks.
func (s *Shells) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shells)
}

// Close terminates every shell, refuses new ones and waits until all of
// their goroutines ended. It may be called more than once.
func (s *Shells) Close() error {
	s.mu.Lock()
	s.closed = true
	all := make([]*shell, 0, len(s.shells))
	for id, sh := range s.shells {
		all = append(all, sh)
		delete(s.shells, id)
	}
	s.mu.Unlock()
	s.terminate(all...)
	s.release(all...)
	s.wg.Wait()
	return nil
}

// output collects a shell's output up to a limit.
type output struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int
}

// Write keeps what fits and counts the rest; it never fails, so the
// process never blocks on a full pipe.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keep := min(len(p), o.max-len(o.buf))
	o.buf = append(o.buf, p[:keep]...)
	o.dropped += len(p) - keep
	return len(p), nil
}

// String returns the output so far as UTF-8 text.
func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	text := strings.ToValidUTF8(string(o.buf), "\uFFFD")
	if o.dropped > 0 {
		text += fmt.Sprintf(truncatedNote, o.dropped)
	}
	return text
}

// secretWords mark environment variables that hold credentials
// (MCP_SERVERS: BUB_MCP_SERVERS holds the MCP servers' env and headers).
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDS", "NKEY", "SEED", "AUTH", "COOKIE", "SESSION", "MCP_SERVERS"}

// minSecretLen is the shortest value redacted from output; shorter values
// ("1", "true") would mangle ordinary text.
const minSecretLen = 6

// ScrubEnv splits environ ("KEY=value" entries) into the entries whose
// names do not look like credentials (no KEY, TOKEN, SECRET, PASSWORD,
// CREDENTIAL, NKEY, SEED, AUTH, MCP_SERVERS, … in the upper-cased name)
// and the values of those that do (at least 6 bytes long), which callers
// redact.
func ScrubEnv(environ []string) (kept, secrets []string) {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		secret := false
		for _, w := range secretWords {
			if strings.Contains(upper, w) {
				secret = true
				break
			}
		}
		if !secret {
			kept = append(kept, kv)
			continue
		}
		if len(value) >= minSecretLen {
			secrets = append(secrets, value)
		}
	}
	return kept, secrets
}

// redact replaces every secret value in text.
func (s *Shells) redact(text string) string {
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, "[redacted]")
	}
	return text
}
