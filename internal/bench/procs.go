package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process of the harness: a service binary or a hidden
// `bub bench --serve` role. Its output is scanned for a readiness line and
// the last lines are kept for error messages.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, set before done closes

	mu   sync.Mutex
	tail []string
}

// startTimeout bounds how long a child may take to say it is ready.
const startTimeout = 60 * time.Second

// startProc starts path with args and env (added to the harness's own),
// and waits until a line of its output matches ready; it returns the
// submatches of that line.
func startProc(ctx context.Context, name, path string, args, env []string, ready *regexp.Regexp) (*proc, []string, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		_ = pw.Close()
		close(p.done)
	}()
	matched := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.tail = append(p.tail, line)
			if len(p.tail) > 40 {
				p.tail = p.tail[len(p.tail)-40:]
			}
			p.mu.Unlock()
			if !found {
				if m := ready.FindStringSubmatch(line); m != nil {
					found = true
					matched <- m
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case m := <-matched:
		return p, m, nil
	case <-p.done:
		return nil, nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", name, p.err, p.output())
	case <-timer.C:
		p.stop()
		return nil, nil, fmt.Errorf("%s not ready within %s:\n%s", name, startTimeout, p.output())
	case <-ctx.Done():
		p.stop()
		return nil, nil, ctx.Err()
	}
}

// output returns the last lines the process wrote.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to drain (SIGTERM) and kills it when it has not
// exited within 20 s. It returns an error when the process had already
// died on its own.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s had exited (%v):\n%s", p.name, p.err, p.output())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// alive returns an error when the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v):\n%s", p.name, p.err, p.output())
	default:
		return nil
	}
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat CPU times (100 on
// every Linux architecture Go supports).
const clockTick = 100

// procCPU returns the user+system CPU time of pid (all threads) from
// /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its closing
	// parenthesis are fixed: utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bench: malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// selfCPU returns this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRSS returns a /proc/<pid>/status memory field (VmRSS, VmHWM) in
// bytes.
func procRSS(pid int, field string) (int64, error) {
	v := procField("/proc/"+strconv.Itoa(pid)+"/status", field)
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, fmt.Errorf("bench: no %s for pid %d", field, pid)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	return kb << 10, err
}
