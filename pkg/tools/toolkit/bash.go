package toolkit

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

const defaultCommandTimeout = 30 // seconds

// ExitError is a foreground command that exited with a non-zero code. Its
// text is Bub's "command exited with code N\noutput:\n<output>"; as a
// [tools.DetailedError] it adds exit_code and output to the tool error.
type ExitError struct {
	Code   int
	Output string // trimmed
}

func (e *ExitError) Error() string {
	body := e.Output
	if body == "" {
		body = "(no output)"
	}
	return fmt.Sprintf("command exited with code %d\noutput:\n%s", e.Code, body)
}

// ErrorDetails returns {exit_code, output}.
func (e *ExitError) ErrorDetails() map[string]any {
	return map[string]any{"exit_code": e.Code, "output": e.Output}
}

var _ tools.DetailedError = (*ExitError)(nil)

func shellTools(opts Options) []tools.Tool {
	sh := opts.Shells
	return []tools.Tool{
		withParams(tools.Tool{
			Name:            "bash",
			Effect:          tools.EffectIrreversible,
			Description:     "Run a shell command. Use background=true to keep it running and fetch output later via bash_output.",
			RequiresContext: true,
			Handler: func(ctx context.Context, tc *tools.Context, args map[string]any) (any, error) {
				return runBash(ctx, sh, tc, args)
			},
		},
			param{name: "cmd", typ: "string", description: "The shell command to run.", required: true},
			param{name: "cwd", typ: "string", description: "Working directory; relative paths start at the workspace (the default)."},
			param{name: "timeout_seconds", typ: "integer", description: "Seconds before a foreground command is terminated.", def: defaultCommandTimeout},
			param{name: "background", typ: "boolean", description: "Keep the command running and return its shell id.", def: false},
		),
		withParams(tools.Tool{
			Name:        "bash.output",
			Effect:      tools.EffectReadOnly,
			Description: "Read buffered output from a background shell, with optional offset/limit for incremental polling.",
			Handler: func(ctx context.Context, _ *tools.Context, args map[string]any) (any, error) {
				return sh.call(ctx, ShellOutput, args)
			},
		},
			param{name: "shell_id", typ: "string", description: "The id bash returned for a background command.", required: true},
			param{name: "offset", typ: "integer", description: "First character to return.", def: 0},
			param{name: "limit", typ: "integer", description: "Most characters to return; all when omitted."},
		),
		withParams(tools.Tool{
			Name:        "bash.kill",
			Effect:      tools.EffectIdempotent,
			Description: "Terminate a background shell process.",
			Handler: func(ctx context.Context, _ *tools.Context, args map[string]any) (any, error) {
				return sh.call(ctx, ShellKill, args)
			},
		},
			param{name: "shell_id", typ: "string", description: "The id bash returned for a background command.", required: true},
		),
	}
}

func runBash(ctx context.Context, shells *Shells, tc *tools.Context, args map[string]any) (any, error) {
	timeout, ok := intArg(args, "timeout_seconds")
	if !ok {
		timeout = defaultCommandTimeout
	}
	if timeout <= 0 {
		return nil, bub.Errorf(bub.KindInvalidInput, "timeout_seconds must be positive, not %d", timeout)
	}
	cwd, ws := stringArg(args, "cwd"), tc.WorkspaceDir()
	switch {
	case cwd == "":
		cwd = ws
	case !filepath.IsAbs(cwd) && ws != "":
		cwd = filepath.Join(ws, cwd)
	}
	sh, err := shells.start(stringArg(args, "cmd"), cwd, tc.Session())
	if err != nil {
		return nil, err
	}
	if boolArg(args, "background") {
		if err := shells.claim(ctx, sh); err != nil {
			shells.forget(sh)
			shells.terminate(sh)
			return nil, fmt.Errorf("recording the owner of shell %s: %w", sh.id, err)
		}
		return "started: " + sh.id, nil
	}
	defer shells.forget(sh)
	timer := time.NewTimer(seconds(timeout))
	defer timer.Stop()
	select {
	case <-sh.exited:
		shells.finalize(sh)
	case <-timer.C:
		shells.terminate(sh)
		return fmt.Sprintf("command timed out after %d seconds and was terminated", timeout), nil
	case <-ctx.Done():
		shells.terminate(sh)
		return nil, ctx.Err()
	}
	out := strings.TrimSpace(shells.redact(sh.out.String()))
	if sh.code != 0 {
		return nil, &ExitError{Code: sh.code, Output: out}
	}
	if out == "" {
		return "(no output)", nil
	}
	return out, nil
}

func bashOutput(shells *Shells, args map[string]any) (string, error) {
	sh, err := shells.get(stringArg(args, "shell_id"))
	if err != nil {
		return "", err
	}
	exited := sh.hasExited()
	if exited {
		shells.finalize(sh)
		shells.forget(sh)
	}
	text := []rune(shells.redact(sh.out.String()))
	start, end := window(args, len(text))
	body := strings.TrimRightFunc(string(text[start:end]), unicode.IsSpace)
	if body == "" {
		body = "(no output)"
	}
	status, code := "running", "null"
	if exited {
		status, code = "exited", strconv.Itoa(sh.code)
	}
	return fmt.Sprintf("id: %s\nstatus: %s\nexit_code: %s\nnext_offset: %d\noutput:\n%s", sh.id, status, code, end, body), nil
}

func killBash(shells *Shells, id string) (string, error) {
	sh, err := shells.get(id)
	if err != nil {
		return "", err
	}
	shells.forget(sh)
	shells.terminate(sh)
	return fmt.Sprintf("id: %s\nstatus: exited\nexit_code: %d", sh.id, sh.code), nil
}
