package toolkit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func fsTools(Options) []tools.Tool {
	pathParam := param{name: "path", typ: "string", description: "File path; relative paths start at the workspace.", required: true}
	return []tools.Tool{
		withParams(tools.Tool{
			Name:            "fs.read",
			Effect:          tools.EffectReadOnly,
			Description:     "Read a text file and return its content. Supports optional pagination with offset and limit.",
			RequiresContext: true,
			Handler:         fsRead,
		},
			pathParam,
			param{name: "offset", typ: "integer", description: "First line to return (0-based).", def: 0},
			param{name: "limit", typ: "integer", description: "Most lines to return; all when omitted."},
		),
		withParams(tools.Tool{
			Name:            "fs.write",
			Effect:          tools.EffectIdempotent,
			Description:     "Write content to a text file.",
			RequiresContext: true,
			Handler:         fsWrite,
		},
			pathParam,
			param{name: "content", typ: "string", description: "The complete new content.", required: true},
		),
		withParams(tools.Tool{
			Name:            "fs.edit",
			Effect:          tools.EffectIrreversible,
			Description:     "Edit a text file by replacing old text with new text. You can specify the line number to start searching for the old text.",
			RequiresContext: true,
			Handler:         fsEdit,
		},
			pathParam,
			param{name: "old", typ: "string", description: "Text to replace; every occurrence from line start on is replaced.", required: true},
			param{name: "new", typ: "string", description: "Replacement text.", required: true},
			param{name: "start", typ: "integer", description: "Line (0-based) where the search begins.", def: 0},
		),
	}
}

func fsRead(_ context.Context, tc *tools.Context, args map[string]any) (any, error) {
	f, err := confine(tc, stringArg(args, "path"))
	if err != nil {
		return nil, err
	}
	text, err := f.read()
	if err != nil {
		return nil, err
	}
	lines := splitLines(text)
	start, end := window(args, len(lines))
	return strings.Join(lines[start:end], "\n"), nil
}

func fsWrite(_ context.Context, tc *tools.Context, args map[string]any) (any, error) {
	f, err := confine(tc, stringArg(args, "path"))
	if err != nil {
		return nil, err
	}
	if err := f.write(stringArg(args, "content")); err != nil {
		return nil, err
	}
	return "wrote: " + f.path, nil
}

// fsEdit replaces old with new from line start on. Unlike Bub it keeps
// the file's line endings and final newline: only the replaced text
// changes.
func fsEdit(_ context.Context, tc *tools.Context, args map[string]any) (any, error) {
	f, err := confine(tc, stringArg(args, "path"))
	if err != nil {
		return nil, err
	}
	old, start := stringArg(args, "old"), 0
	if old == "" {
		return nil, bub.Errorf(bub.KindInvalidInput, "old must not be empty")
	}
	if n, ok := intArg(args, "start"); ok {
		start = max(0, n)
	}
	text, err := f.read()
	if err != nil {
		return nil, err
	}
	// The model sees lines as fs.read shows them, joined by \n: the edit
	// is made on that text, and the file keeps its own line break.
	text, eol := universal(text)
	old, _ = universal(old)
	repl, _ := universal(stringArg(args, "new"))
	at := lineOffset(text, start)
	if !strings.Contains(text[at:], old) {
		return nil, fmt.Errorf("'%s' not found in %s from line %d", old, f.path, start)
	}
	out := text[:at] + strings.ReplaceAll(text[at:], old, repl)
	if eol != "\n" {
		out = strings.ReplaceAll(out, "\n", eol)
	}
	if err := f.write(out); err != nil {
		return nil, err
	}
	return "edited: " + f.path, nil
}

// splitLines splits text at \n, \r\n and \r; a final line break ends the
// last line rather than starting an empty one.
func splitLines(text string) []string {
	text, _ = universal(text)
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// universal returns text with Python's universal newlines (\r\n and \r
// read as \n), and the line break text uses (\r\n or \r when it has one,
// else \n; a file that mixes them gets its first kind).
func universal(text string) (norm, eol string) {
	eol = "\n"
	switch {
	case strings.Contains(text, "\r\n"):
		eol = "\r\n"
	case strings.Contains(text, "\r"):
		eol = "\r"
	}
	return strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), eol
}

// lineOffset returns the byte offset where line n (0-based) of text
// starts, or len(text) when text has fewer lines.
func lineOffset(text string, n int) int {
	at := 0
	for ; n > 0; n-- {
		i := strings.IndexAny(text[at:], "\r\n")
		if i < 0 {
			return len(text)
		}
		at += i + 1
		if text[at-1] == '\r' && at < len(text) && text[at] == '\n' {
			at++
		}
	}
	return at
}

// confined is a file inside the workspace.
type confined struct {
	root string // the workspace with symbolic links resolved
	rel  string // the file relative to root, free of symbolic links
	path string // root joined with rel: what messages show
}

// confine resolves raw (relative to the workspace, "~" expanded) to a
// file inside the workspace. A path that leaves the workspace — through
// "..", as an absolute path elsewhere, or through a symbolic link that
// resolves elsewhere — is an invalid_input *bub.Error naming raw.
func confine(tc *tools.Context, raw string) (confined, error) {
	ws := tc.WorkspaceDir()
	if ws == "" {
		return confined{}, &bub.Error{Kind: bub.KindInvalidInput, Message: fmt.Sprintf("path '%s' needs a workspace and there is none", raw)}
	}
	wsAbs, err := filepath.Abs(ws)
	if err != nil {
		return confined{}, fmt.Errorf("workspace %s: %w", ws, err)
	}
	root, err := filepath.EvalSymlinks(wsAbs)
	if err != nil {
		return confined{}, fmt.Errorf("workspace %s: %w", ws, err)
	}
	outside := &bub.Error{
		Kind:    bub.KindInvalidInput,
		Message: fmt.Sprintf("path '%s' is outside the workspace %s", raw, wsAbs),
		Details: map[string]any{"path": raw, "workspace": wsAbs},
	}
	p := raw
	if home, err := os.UserHomeDir(); err == nil && (p == "~" || strings.HasPrefix(p, "~/")) {
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(wsAbs, p)
	}
	p = filepath.Clean(p)
	if _, in := within(wsAbs, p); !in {
		if _, in := within(root, p); !in {
			return confined{}, outside
		}
	}
	real, err := realPath(p)
	if err != nil {
		return confined{}, fmt.Errorf("resolve %s: %w", raw, err)
	}
	rel, in := within(root, real)
	if !in {
		return confined{}, outside
	}
	return confined{root: root, rel: rel, path: filepath.Join(root, rel)}, nil
}

// within returns p relative to base when p is base or beneath it.
func within(base, p string) (string, bool) {
	rel, err := filepath.Rel(base, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// realPath resolves every symbolic link in the absolute, clean path p,
// including links whose targets do not exist yet (a file about to be
// written), and keeps the missing tail as it is.
func realPath(p string) (string, error) {
	tail := ""
	for range 255 {
		resolved, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(resolved, tail), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		info, lerr := os.Lstat(p)
		switch {
		case lerr == nil && info.Mode()&fs.ModeSymlink != 0: // a dangling link: follow it
			target, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			p = filepath.Clean(target)
		case lerr == nil:
			return "", err
		default: // p does not exist: resolve its parent
			parent := filepath.Dir(p)
			if parent == p {
				return filepath.Join(p, tail), nil
			}
			tail = filepath.Join(filepath.Base(p), tail)
			p = parent
		}
	}
	return "", errors.New("too many levels of symbolic links")
}

// read returns the file's text, which must be UTF-8. It goes through an
// os.Root, so a link swapped in meanwhile cannot lead outside.
func (f confined) read() (string, error) {
	r, err := os.OpenRoot(f.root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := r.ReadFile(f.rel)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s is not a UTF-8 text file", f.path)
	}
	return string(b), nil
}

// write replaces the file's content, creating missing parent directories.
func (f confined) write(content string) error {
	r, err := os.OpenRoot(f.root)
	if err != nil {
		return err
	}
	defer r.Close()
	if dir := filepath.Dir(f.rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return r.WriteFile(f.rel, []byte(content), 0o644)
}
