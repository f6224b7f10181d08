package toolkit

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

// TestFSEditCRLFMultiLineOld (failed before its fix): spec §8.3 fs.edit "searches lines from
// `start`; … replaces ALL occurrences in that region". Bub reads the file
// with Python's universal newlines (Path.read_text) and splits it with
// splitlines, so a CRLF file is searched as "\n"-joined lines.
//
// Sequence: a CRLF file "alpha\r\nbeta\r\ngamma\r\n"; fs.read shows
// "alpha\nbeta\ngamma" (the model only ever sees "\n"); the model sends
// fs.edit old="alpha\nbeta" new="one\ntwo", copied from what fs.read showed.
//
// Expected (Bub): "edited: <path>", and fs.read then shows
// "one\ntwo\ngamma". Go: "'alpha\nbeta' not found …", because the search
// runs over the raw "\r\n" text: no multi-line edit of a CRLF (or CR) file
// can ever succeed.
func TestFSEditCRLFMultiLineOld(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.ws, "win.txt")
	writeFile(t, path, "alpha\r\nbeta\r\ngamma\r\n")
	if got := e.run(t, "fs.read", e.tc("s"), map[string]any{"path": "win.txt"}); got != "alpha\nbeta\ngamma" {
		t.Fatalf("fs.read = %q", got)
	}
	res, err := e.call(t.Context(), t, "fs.edit", e.tc("s"), map[string]any{"path": "win.txt", "old": "alpha\nbeta", "new": "one\ntwo"})
	if err != nil {
		t.Fatalf("fs.edit of the text fs.read showed failed: %v %v", err, err.Details)
	}
	if res != "edited: "+path {
		t.Fatalf("fs.edit = %v", res)
	}
	if got := e.run(t, "fs.read", e.tc("s"), map[string]any{"path": "win.txt"}); got != "one\ntwo\ngamma" {
		t.Fatalf("after the edit fs.read = %q, want %q", got, "one\ntwo\ngamma")
	}
}

// TestReadWindowLimitOverflow (failed before its fix): spec §8.3 fs.read "path, offset=0,
// limit?" and bash.output "shell_id, offset=0, limit?" – Bub computes
// end = min(len, start + max(0, limit)) on Python ints, so any limit works.
//
// Sequence: `,fs.read path=a.txt offset=1 limit=9223372036854775807` (and
// the same window on bash.output of an exited background shell).
// Expected: "l1\nl2" (everything from line 1). Go: start+limit overflows
// int, end turns negative, lines[start:end] panics and the call becomes
// "Tool 'fs_read' execution failed." (panic: slice bounds out of range);
// for bash.output the exited shell was already forgotten, so its output is
// lost for good.
func TestReadWindowLimitOverflow(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.ws, "a.txt"), "l0\nl1\nl2\n")
	inv, perr := tools.ResolveCommand(e.reg, "fs.read path=a.txt offset=1 limit=9223372036854775807")
	if perr != nil {
		t.Fatal(perr)
	}
	res, err := tools.Invoke(t.Context(), inv.Tool, e.tc("s"), inv.Args)
	if err != nil {
		t.Errorf("fs.read with limit=MaxInt64: %v %v", err, err.Details)
	} else if res != "l1\nl2" {
		t.Errorf("fs.read = %q, want %q", res, "l1\nl2")
	}

	sh := e.background(t, "s", "printf 'abc\\n'")
	waitExited(t, sh)
	res, err = e.call(t.Context(), t, "bash.output", nil, map[string]any{"shell_id": sh.id, "offset": 1, "limit": math.MaxInt})
	if err != nil {
		t.Fatalf("bash.output with limit=MaxInt: %v %v", err, err.Details)
	}
	if !strings.HasSuffix(res.(string), "output:\nbc") {
		t.Fatalf("bash.output = %q", res)
	}
}

// TestBashHugeTimeout (failed before its fix): spec §8.3 bash "timeout_seconds=30 …
// foreground timeout → terminate, return `command timed out after N
// seconds and was terminated`" – only when N seconds actually passed.
//
// Sequence: bash cmd="sleep 0.3; echo ok" timeout_seconds=10000000000 (a
// valid integer; asyncio.timeout takes it).
// Expected: "ok". Go: time.Duration(timeout)*time.Second overflows int64,
// the timer gets a negative duration and fires at once: the command is
// killed immediately and the tool claims it timed out after 10000000000
// seconds.
func TestBashHugeTimeout(t *testing.T) {
	e := newEnv(t)
	got, err := e.call(t.Context(), t, "bash", e.tc("s"), map[string]any{"cmd": "sleep 0.3; echo ok", "timeout_seconds": 10_000_000_000})
	if err != nil {
		t.Fatalf("bash: %v %v", err, err.Details)
	}
	if got != "ok" {
		t.Fatalf("bash with a huge timeout = %q, want %q", got, "ok")
	}
}

// TestWebFetchHugeTimeout (failed before its fix): spec §8.3 web.fetch "timeout default 10
// s"; a larger timeout only allows a slower answer.
//
// Sequence: web.fetch url=<server> timeout=10000000000.
// Expected: the body. Go: context.WithTimeout with an overflowed negative
// duration is already expired, so the request fails at once with
// "context deadline exceeded".
func TestWebFetchHugeTimeout(t *testing.T) {
	srv := newWebServer(t)
	res, err := tools.Invoke(t.Context(), webFetch(t, srv, 1<<20), nil, map[string]any{"url": srv.URL + "/echo", "timeout": 10_000_000_000})
	if err != nil {
		t.Fatalf("web.fetch with a huge timeout: %v %v", err, err.Details)
	}
	if !strings.HasPrefix(res.(string), "method=GET") {
		t.Fatalf("web.fetch = %q", res)
	}
}

// TestWebFetchCharset (failed before its fix): spec §8.3 web.fetch "returns body text"; Bub
// returns aiohttp's response.text(), which decodes the body with the
// charset of the Content-Type header.
//
// Sequence: a server answers "Content-Type: text/plain; charset=iso-8859-1"
// with the bytes "caf\xe9"; web.fetch it.
// Expected (Bub): "café". Go always treats the body as UTF-8 and returns
// "caf\uFFFD": every non-ASCII character of a Latin-1/Windows-1252/
// Shift_JIS/GBK page is destroyed.
func TestWebFetchCharset(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.Write([]byte("caf\xe9"))
	}))
	t.Cleanup(srv.Close)
	res, err := tools.Invoke(t.Context(), webFetch(t, srv, 1<<20), nil, map[string]any{"url": srv.URL})
	if err != nil {
		t.Fatalf("web.fetch: %v", err)
	}
	if res != "café" {
		t.Fatalf("web.fetch of a declared ISO-8859-1 body = %q, want %q", res, "café")
	}
}

// spawnRecorder is a tools.Spawner that records the request the subagent
// tool builds (the tool's collaborator, not the code under test).
type spawnRecorder struct{ req *tools.SpawnRequest }

func (s *spawnRecorder) Spawn(_ context.Context, req tools.SpawnRequest) (string, error) {
	*s.req = req
	return "done", nil
}

// TestSubagentEmptyAllowedSkills (failed before its fix): spec §5.2 "`allowed_skills` (if
// given) casefolded and written to `state.allowed_skills`" and §8.5; Bub's
// subagent passes param.allowed_skills through unchanged (only
// allowed_tools gets `or None`), so allowed_skills=[] gives the subagent an
// EMPTY allow-list: no skills at all.
//
// Sequence: subagent prompt="x" allowed_skills=[].
// Expected: SpawnRequest.AllowedSkills is a non-nil empty list ("none").
// Go drops the empty list (len > 0 check), AllowedSkills is nil, which
// SpawnRequest documents as "nil = all": the subagent sees every skill
// (or the parent's list), the opposite of what was asked.
func TestSubagentEmptyAllowedSkills(t *testing.T) {
	e := newEnv(t)
	var req tools.SpawnRequest
	tc := &tools.Context{SessionID: "s", Workspace: e.ws, State: bub.NewState(nil), Spawner: &spawnRecorder{req: &req}}
	if _, err := e.call(t.Context(), t, "subagent", tc, map[string]any{"prompt": "x", "allowed_skills": []any{}}); err != nil {
		t.Fatalf("subagent: %v %v", err, err.Details)
	}
	if req.AllowedSkills == nil {
		t.Fatalf("allowed_skills=[] reached the spawner as nil (= all skills); want an empty allow-list")
	}
}
