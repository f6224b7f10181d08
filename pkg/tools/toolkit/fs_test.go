package toolkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestFSRead(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.ws, "a.txt"), "l0\nl1\nl2\nl3\n")
	writeFile(t, filepath.Join(e.ws, "crlf.txt"), "a\r\nb\rc\r\n\r\n")
	writeFile(t, filepath.Join(e.ws, "empty.txt"), "")
	writeFile(t, filepath.Join(e.ws, "dir/deep.txt"), "deep")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "whole file", args: map[string]any{"path": "a.txt"}, want: "l0\nl1\nl2\nl3"},
		{name: "offset", args: map[string]any{"path": "a.txt", "offset": 2}, want: "l2\nl3"},
		{name: "offset and limit", args: map[string]any{"path": "a.txt", "offset": 1, "limit": 2}, want: "l1\nl2"},
		{name: "offset past the end", args: map[string]any{"path": "a.txt", "offset": 9}, want: ""},
		{name: "negative offset and limit", args: map[string]any{"path": "a.txt", "offset": -1, "limit": -5}, want: ""},
		{name: "line endings", args: map[string]any{"path": "crlf.txt"}, want: "a\nb\nc\n"},
		{name: "empty file", args: map[string]any{"path": "empty.txt"}, want: ""},
		{name: "nested", args: map[string]any{"path": "dir/deep.txt"}, want: "deep"},
		{name: "absolute inside", args: map[string]any{"path": filepath.Join(e.ws, "a.txt"), "limit": 1}, want: "l0"},
		{name: "dot segments inside", args: map[string]any{"path": "dir/../a.txt", "limit": 1}, want: "l0"},
	}
	for _, tt := range tests {
		if got := e.run(t, "fs.read", e.tc("s"), tt.args); got != tt.want {
			t.Errorf("%s: fs.read = %q, want %q", tt.name, got, tt.want)
		}
	}

	writeFile(t, filepath.Join(e.ws, "bin"), "\xff\xfe")
	for _, path := range []string{"missing.txt", "bin", "dir"} {
		if _, err := e.call(t.Context(), t, "fs.read", e.tc("s"), map[string]any{"path": path}); err == nil || err.Kind != bub.KindTool {
			t.Errorf("fs.read %s = %v, want a tool error", path, err)
		}
	}
}

func TestFSWrite(t *testing.T) {
	e := newEnv(t)
	got := e.run(t, "fs.write", e.tc("s"), map[string]any{"path": "new/dir/f.txt", "content": "hello"})
	if want := "wrote: " + filepath.Join(e.ws, "new/dir/f.txt"); got != want {
		t.Fatalf("fs.write = %q, want %q", got, want)
	}
	if got := readFile(t, filepath.Join(e.ws, "new/dir/f.txt")); got != "hello" {
		t.Fatalf("file = %q", got)
	}
	e.run(t, "fs.write", e.tc("s"), map[string]any{"path": "new/dir/f.txt", "content": ""})
	if got := readFile(t, filepath.Join(e.ws, "new/dir/f.txt")); got != "" {
		t.Fatalf("overwritten file = %q", got)
	}
	if _, err := e.call(t.Context(), t, "fs.write", e.tc("s"), map[string]any{"path": "x"}); err == nil || err.Kind != bub.KindInvalidInput {
		t.Fatalf("fs.write without content = %v", err)
	}
}

func TestFSEdit(t *testing.T) {
	tests := []struct {
		name, content string
		args          map[string]any
		want          string // file content after the edit
		err           string // error text instead
	}{
		{name: "all occurrences", content: "a x\nx b\n", args: map[string]any{"old": "x", "new": "y"}, want: "a y\ny b\n"},
		{name: "from a line", content: "x\nx\nx\n", args: map[string]any{"old": "x", "new": "y", "start": 1}, want: "x\ny\ny\n"},
		{name: "multi-line old", content: "a\nb\nc", args: map[string]any{"old": "a\nb", "new": "z"}, want: "z\nc"},
		{name: "keeps CRLF and final newline", content: "p\r\nq\r\nq\r\n", args: map[string]any{"old": "q", "new": "r", "start": 1}, want: "p\r\nr\r\nr\r\n"},
		{name: "negative start", content: "x\n", args: map[string]any{"old": "x", "new": "y", "start": -2}, want: "y\n"},
		{name: "not found", content: "x\ny\n", args: map[string]any{"old": "x", "new": "z", "start": 1}, err: "'x' not found in %s from line 1"},
		{name: "start past the end", content: "x\n", args: map[string]any{"old": "x", "new": "z", "start": 5}, err: "'x' not found in %s from line 5"},
		{name: "empty old", content: "x", args: map[string]any{"old": "", "new": "z"}, err: "old must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			path := filepath.Join(e.ws, "f.txt")
			writeFile(t, path, tt.content)
			tt.args["path"] = "f.txt"
			res, err := e.call(t.Context(), t, "fs.edit", e.tc("s"), tt.args)
			if tt.err != "" {
				want := strings.ReplaceAll(tt.err, "%s", path)
				if err == nil || (err.Details["error"] != want && err.Message != want) {
					t.Fatalf("fs.edit error = %v %v, want %q", err, details(err), want)
				}
				if got := readFile(t, path); got != tt.content {
					t.Fatalf("failed edit changed the file to %q", got)
				}
				return
			}
			if err != nil || res != "edited: "+path {
				t.Fatalf("fs.edit = %v, %v", res, err)
			}
			if got := readFile(t, path); got != tt.want {
				t.Fatalf("file = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFSConfinement runs every fs tool against every way out of the
// workspace.
func TestFSConfinement(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	writeFile(t, secret, "secret")
	t.Setenv("HOME", outside)

	symlink(t, outside, filepath.Join(e.ws, "out-dir"))                                     // dir link, absolute
	symlink(t, secret, filepath.Join(e.ws, "out-file"))                                     // file link
	symlink(t, filepath.Join("..", filepath.Base(outside)), filepath.Join(e.ws, "out-rel")) // relative dir link
	symlink(t, filepath.Join(outside, "new.txt"), filepath.Join(e.ws, "dangling"))          // dangling link
	writeFile(t, filepath.Join(e.ws, "sub/ok.txt"), "ok")
	symlink(t, filepath.Join(e.ws, "sub"), filepath.Join(e.ws, "sub-link")) // inside: allowed

	escapes := []string{
		"../secret.txt",
		"../" + filepath.Base(outside) + "/secret.txt",
		"sub/../../x.txt",
		"..",
		secret,
		"/etc/hostname",
		"out-dir/secret.txt",
		"out-dir/new.txt",
		"out-file",
		"out-rel/secret.txt",
		"dangling",
		"sub-link/../out-dir/secret.txt",
		"~/secret.txt",
	}
	calls := map[string]map[string]any{
		"fs.read":  {},
		"fs.write": {"content": "pwned"},
		"fs.edit":  {"old": "secret", "new": "pwned"},
	}
	for name, extra := range calls {
		for _, path := range escapes {
			args := map[string]any{"path": path}
			for k, v := range extra {
				args[k] = v
			}
			_, err := e.call(t.Context(), t, name, e.tc("s"), args)
			if err == nil || err.Kind != bub.KindInvalidInput || !strings.Contains(err.Message, "'"+path+"'") {
				t.Errorf("%s %s: error = %v, want invalid_input naming the path", name, path, err)
			}
		}
	}
	entries, _ := os.ReadDir(outside)
	if got := readFile(t, secret); got != "secret" || len(entries) != 1 {
		t.Fatalf("outside directory changed: secret %q, %d entries", got, len(entries))
	}

	// Links that stay inside the workspace are fine.
	if got := e.run(t, "fs.read", e.tc("s"), map[string]any{"path": "sub-link/ok.txt"}); got != "ok" {
		t.Fatalf("fs.read through an inside link = %q", got)
	}
	got := e.run(t, "fs.write", e.tc("s"), map[string]any{"path": "sub-link/new.txt", "content": "n"})
	if want := "wrote: " + filepath.Join(e.ws, "sub/new.txt"); got != want {
		t.Fatalf("fs.write through an inside link = %q, want %q", got, want)
	}
	symlink(t, "sub/later.txt", filepath.Join(e.ws, "dangling-in"))
	e.run(t, "fs.write", e.tc("s"), map[string]any{"path": "dangling-in", "content": "later"})
	if got := readFile(t, filepath.Join(e.ws, "sub/later.txt")); got != "later" {
		t.Fatalf("write through an inside dangling link = %q", got)
	}
}

func TestFSWorkspace(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.ws, "a.txt"), "a")
	link := filepath.Join(t.TempDir(), "ws-link")
	symlink(t, e.ws, link)
	state := bub.NewState(map[string]any{bub.StateWorkspace: link})

	tests := []struct {
		name string
		tc   *tools.Context
		path string
	}{
		{name: "workspace from state, through a link", tc: &tools.Context{State: state}, path: "a.txt"},
		{name: "absolute through the link", tc: &tools.Context{State: state}, path: filepath.Join(link, "a.txt")},
		{name: "absolute real path", tc: &tools.Context{Workspace: link}, path: filepath.Join(e.ws, "a.txt")},
	}
	for _, tt := range tests {
		if got := e.run(t, "fs.read", tt.tc, map[string]any{"path": tt.path}); got != "a" {
			t.Errorf("%s: fs.read = %q", tt.name, got)
		}
	}

	_, err := e.call(t.Context(), t, "fs.read", &tools.Context{}, map[string]any{"path": "a.txt"})
	if err == nil || err.Kind != bub.KindInvalidInput || !strings.Contains(err.Message, "'a.txt'") {
		t.Fatalf("fs.read without a workspace = %v", err)
	}
	_, err = e.call(t.Context(), t, "fs.read", &tools.Context{Workspace: filepath.Join(e.ws, "missing")}, map[string]any{"path": "a.txt"})
	if err == nil || err.Kind != bub.KindTool {
		t.Fatalf("fs.read in a missing workspace = %v", err)
	}
}
