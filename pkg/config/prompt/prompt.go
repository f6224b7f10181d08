package prompt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/bubbus/bub/pkg/hooks"
)

// ErrAborted is wrapped by the error of a question the person did not
// answer: the input ended at the prompt or the context was cancelled.
var ErrAborted = errors.New("onboarding aborted")

// Interactive asks a person: it writes each question's prompt to out and
// reads one line from in as the answer (an empty line is the default).
// When in is a terminal, secret answers are read without echo. It is not
// safe for concurrent use; once a question was aborted, every later one
// is too.
type Interactive struct {
	in      *bufio.Reader
	out     io.Writer
	fd      int // the terminal in is, -1 when it is none
	aborted error
}

// NewInteractive returns a prompter reading answers from in (os.Stdin)
// and writing prompts to out.
func NewInteractive(in io.Reader, out io.Writer) *Interactive {
	p := &Interactive{in: bufio.NewReader(in), out: out, fd: -1}
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.fd = int(f.Fd())
	}
	return p
}

var _ hooks.Prompter = (*Interactive)(nil)

type answer struct {
	text string
	err  error
}

// Ask shows q and returns the answer, or q.Default for an empty one. The
// end of the input before a line, or ctx's cancellation while waiting, is
// an error wrapping [ErrAborted]. A read abandoned by a cancellation ends
// when the input does (the process is about to exit).
func (p *Interactive) Ask(ctx context.Context, q hooks.Question) (string, error) {
	if p.aborted != nil {
		return "", p.aborted
	}
	if err := ctx.Err(); err != nil {
		return "", p.abort(err)
	}
	fmt.Fprint(p.out, promptText(q))
	hide := q.Secret && p.fd >= 0
	var saved *term.State
	if hide {
		var err error
		if saved, err = term.GetState(p.fd); err != nil {
			hide = false
		}
	}
	got := make(chan answer, 1)
	go func() {
		if hide {
			b, err := term.ReadPassword(p.fd)
			got <- answer{string(b), err}
			return
		}
		line, err := p.in.ReadString('\n')
		if err == io.EOF && line != "" {
			err = nil
		}
		got <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		if hide {
			_ = term.Restore(p.fd, saved)
		}
		fmt.Fprintln(p.out)
		return "", p.abort(ctx.Err())
	case a := <-got:
		if hide {
			fmt.Fprintln(p.out) // the person's newline was not echoed
		}
		switch {
		case errors.Is(a.err, io.EOF):
			fmt.Fprintln(p.out)
			return "", p.abort(fmt.Errorf("end of input at %q", q.Prompt))
		case a.err != nil:
			return "", fmt.Errorf("reading the answer to %q: %w", q.Prompt, a.err)
		}
		if s := strings.TrimSpace(a.text); s != "" {
			return s, nil
		}
		return q.Default, nil
	}
}

func (p *Interactive) abort(cause error) error {
	p.aborted = fmt.Errorf("%w: %w", ErrAborted, cause)
	return p.aborted
}

// promptText is "Prompt (choice, choice) [default]: "; a secret's default
// is not shown.
func promptText(q hooks.Question) string {
	var b strings.Builder
	b.WriteString(q.Prompt)
	if len(q.Choices) > 0 {
		b.WriteString(" (" + strings.Join(q.Choices, ", ") + ")")
	}
	if q.Default != "" && !q.Secret {
		b.WriteString(" [" + q.Default + "]")
	}
	b.WriteString(": ")
	return b.String()
}

// Answers answers questions by key from Values; a question whose key has
// no value is passed to Fallback, or answered with its default when
// Fallback is nil (non-interactive onboarding). It records the keys it
// was asked, in order. It is not safe for concurrent use.
type Answers struct {
	Values   map[string]string
	Fallback hooks.Prompter
	asked    []string
}

var _ hooks.Prompter = (*Answers)(nil)

// Ask returns Values[q.Key] when set, else Fallback's answer or q.Default.
// A cancelled ctx is an error wrapping [ErrAborted].
func (a *Answers) Ask(ctx context.Context, q hooks.Question) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrAborted, err)
	}
	if !slices.Contains(a.asked, q.Key) {
		a.asked = append(a.asked, q.Key)
	}
	if v, ok := a.Values[q.Key]; ok {
		return v, nil
	}
	if a.Fallback != nil {
		return a.Fallback.Ask(ctx, q)
	}
	return q.Default, nil
}

// Asked returns the keys of the questions asked so far, in order, each
// once.
func (a *Answers) Asked() []string { return slices.Clone(a.asked) }

// Unused returns the keys of Values no question asked for, sorted.
func (a *Answers) Unused() []string {
	var out []string
	for k := range a.Values {
		if !slices.Contains(a.asked, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ParsePair splits "key=value" at the first '='; key and value are
// trimmed, and the key must not be empty. Its errors never quote s (it
// may hold a secret).
func ParsePair(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok {
		return "", "", errors.New("want key=value, found no '='")
	}
	if k == "" {
		return "", "", errors.New("want key=value, the key is empty")
	}
	return k, strings.TrimSpace(v), nil
}

// ParseAnswers reads answers as `key=value` lines; blank lines and lines
// starting with '#' are skipped, and a later line for a key wins. A line
// that is not key=value is an error naming its number.
func ParseAnswers(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, err := ParsePair(line)
		if err != nil {
			return nil, fmt.Errorf("answers line %d: %w", n, err)
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading answers: %w", err)
	}
	return out, nil
}
