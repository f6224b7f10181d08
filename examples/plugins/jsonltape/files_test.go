package jsonltape_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/examples/plugins/jsonltape"
	"github.com/bubbus/bub/pkg/tape"
)

func mustAppend(t *testing.T, s tape.Store, name string, entries []tape.Entry, opts ...tape.AppendOption) []tape.Entry {
	t.Helper()
	stored, err := s.Append(t.Context(), name, entries, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func mustFetch(t *testing.T, s tape.Store, name string) []tape.Entry {
	t.Helper()
	got, err := s.Fetch(t.Context(), name, tape.All())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func ids(entries []tape.Entry) []int64 {
	out := []int64{}
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

func TestFileIsBubsFormat(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	e := tape.MessageEntry(map[string]any{"role": "user", "content": "日本語 café 😀 <b>"}, map[string]any{"run_id": "r1"})
	e.Date = "2026-05-14T10:11:12+00:00"
	mustAppend(t, s, "0123456789abcdef__fedcba9876543210", []tape.Entry{e, {Kind: tape.KindSystem, Date: "2026-05-14T10:11:13+00:00"}})
	data, err := os.ReadFile(filepath.Join(dir, "0123456789abcdef__fedcba9876543210.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id": 1, "kind": "message", "payload": {"content": "日本語 café 😀 <b>", "role": "user"}, "meta": {"run_id": "r1"}, "date": "2026-05-14T10:11:12+00:00"}` + "\n" +
		`{"id": 2, "kind": "system", "payload": {}, "meta": {}, "date": "2026-05-14T10:11:13+00:00"}` + "\n"
	if string(data) != want {
		t.Fatalf("tape file\n%s\nwant\n%s", data, want)
	}
}

func TestFileNames(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	names := []string{"telegram:1", "a b.c", "A", "a", "x/../../etc", "ü", "%41"}
	for _, name := range names {
		mustAppend(t, s, name, []tape.Entry{tape.System(name)})
	}
	for _, file := range []string{"telegram%3A1.jsonl", "a%20b%2Ec.jsonl", "%41.jsonl", "a.jsonl", "x%2F%2E%2E%2F%2E%2E%2Fetc.jsonl", "%C3%BC.jsonl", "%2541.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
			t.Error(err)
		}
	}
	got, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Fatalf("List = %q, want %q", got, names)
	}
	for _, name := range names {
		if e := mustFetch(t, s, name); len(e) != 1 || e[0].Payload["content"] != name {
			t.Fatalf("tape %q holds %#v", name, e)
		}
	}
	if _, err := s.Append(t.Context(), "", []tape.Entry{tape.System("x")}); err == nil {
		t.Fatal("empty tape name accepted")
	}
	long := string(make([]byte, 100)) // 100 NUL bytes escape to 300
	if _, err := s.Append(t.Context(), long, []tape.Entry{tape.System("x")}); err == nil {
		t.Fatal("tape name too long for a file name accepted")
	}
}

// TestAnotherStoreSeesWrites uses two stores on one directory, as two
// processes would: each sees the other's appends, resets and watermarks.
func TestAnotherStoreSeesWrites(t *testing.T) {
	dir := t.TempDir()
	a := newStore(t, dir)
	b, err := jsonltape.NewStore(dir, jsonltape.WithPollInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(t.Context())

	mustAppend(t, a, "s", []tape.Entry{tape.System("one"), tape.Anchor("x", nil)}, tape.WithCommitID("run-1"))
	if got := ids(mustFetch(t, b, "s")); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("b reads %v", got)
	}
	mustAppend(t, b, "s", []tape.Entry{tape.System("three")})
	if got := ids(mustFetch(t, a, "s")); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("a reads %v after b's append", got)
	}
	// b knows a's commit id.
	if again := mustAppend(t, b, "s", []tape.Entry{tape.System("dup")}, tape.WithCommitID("run-1")); !slices.Equal(ids(again), []int64{1, 2}) {
		t.Fatalf("replayed commit from the other store: %v", ids(again))
	}
	ix, err := a.Index(t.Context(), "s")
	if err != nil || ix.Entries != 3 || ix.Anchors != 1 {
		t.Fatalf("a's index %+v, %v", ix, err)
	}

	done := make(chan error, 1)
	go func() {
		ix, err := b.WaitWatermark(t.Context(), "s", "events", 9)
		if err == nil && ix.Watermark("events") != 9 {
			err = fmt.Errorf("index %+v", ix)
		}
		done <- err
	}()
	mustAppend(t, a, "s", nil, tape.WithWatermark("events", 9))
	if err := <-done; err != nil {
		t.Fatalf("WaitWatermark in the other store: %v", err)
	}

	if err := a.Reset(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if got := mustFetch(t, b, "s"); len(got) != 0 {
		t.Fatalf("b reads %v after a's reset", ids(got))
	}
	if got := ids(mustAppend(t, b, "s", []tape.Entry{tape.System("again")})); !slices.Equal(got, []int64{1}) {
		t.Fatalf("ids after the other store's reset: %v", got)
	}
}

// TestBubFiles opens files Python Bub wrote: no sidecar, bad lines, a line
// still being written, a file deleted by Bub's reset.
func TestBubFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "abc__def.jsonl")
	content := `{"id": 1, "kind": "anchor", "payload": {"name": "session/start"}, "meta": {}, "date": "2026-01-01T00:00:00+00:00"}` + "\n" +
		"not json\n\n" +
		`{"id": 2, "kind": "message", "payload": {"role": "user", "content": "hi"}, "timestamp": 1700000000}` + "\n" +
		`{"id": 3, "kind": "message", "payl` // unfinished
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, dir)
	got := mustFetch(t, s, "abc__def")
	if !slices.Equal(ids(got), []int64{1, 2}) || got[1].Date != "2023-11-14T22:13:20+00:00" {
		t.Fatalf("read %#v", got)
	}
	ix, err := s.Index(t.Context(), "abc__def")
	if err != nil || ix.Entries != 2 || ix.LastID != 2 || ix.Anchors != 1 {
		t.Fatalf("index %+v, %v", ix, err)
	}
	// Appending ends the unfinished line first; it is then skipped.
	if got := ids(mustAppend(t, s, "abc__def", []tape.Entry{tape.System("mine")})); !slices.Equal(got, []int64{3}) {
		t.Fatalf("appended ids %v", got)
	}
	if got := ids(mustFetch(t, s, "abc__def")); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("after append %v", got)
	}
	// Bub appends a line: it is seen incrementally and indexed.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"id": 4, "kind": "anchor", "payload": {"name": "bub"}, "meta": {}, "date": "2026-01-02T00:00:00+00:00"}`)
	f.Close()
	if got := mustFetch(t, s, "abc__def"); !slices.Equal(ids(got), []int64{1, 2, 3, 4}) {
		t.Fatalf("after Bub's append %v", ids(got))
	}
	if ix, _ := s.Index(t.Context(), "abc__def"); ix.LastID != 4 || ix.Anchors != 2 {
		t.Fatalf("index after Bub's append %+v", ix)
	}
	// Bub's reset deletes the file: the tape is empty, watermarks stay.
	mustAppend(t, s, "abc__def", nil, tape.WithWatermark("w", 3))
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := mustFetch(t, s, "abc__def"); len(got) != 0 {
		t.Fatalf("deleted file reads %v", ids(got))
	}
	if ix, _ := s.Index(t.Context(), "abc__def"); ix.Entries != 0 || ix.Watermark("w") != 3 {
		t.Fatalf("index after delete %+v", ix)
	}
	if got := ids(mustAppend(t, s, "abc__def", []tape.Entry{tape.System("new")})); !slices.Equal(got, []int64{1}) {
		t.Fatalf("ids after delete %v", got)
	}
}

func TestArchiveFiles(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	entries := mustAppend(t, s, "t:1", []tape.Entry{tape.System("ß")})
	loc, err := s.Archive(t.Context(), "t:1", entries)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Archive(t.Context(), "t:1", entries)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(loc) != filepath.Join(s.Dir(), "archive") || loc == second {
		t.Fatalf("archive locations %q and %q", loc, second)
	}
	if ok, _ := filepath.Match("t%3A1.jsonl.????????T??????Z.bak", filepath.Base(loc)); !ok {
		t.Fatalf("archive name %q is not Bub's <tape>.jsonl.<stamp>.bak", filepath.Base(loc))
	}
	for _, bad := range []string{filepath.Join(dir, "t%3A1.jsonl"), filepath.Join(s.Dir(), "archive", "missing.bak"), "../archive/x.bak"} {
		if _, err := s.ReadArchive(t.Context(), bad); !errors.Is(err, tape.ErrBadLocation) {
			t.Errorf("ReadArchive(%q) = %v, want ErrBadLocation", bad, err)
		}
	}
	// A reset through the Tape handle archives the tape in another store's view too.
	other := newStore(t, dir)
	out, err := tape.New(s, "t:1", tape.Context{}).Reset(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := other.ReadArchive(t.Context(), out[len("Archived: "):])
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("archive read by another store: %#v, %v", got, err)
	}
}

func TestClose(t *testing.T) {
	s, err := jsonltape.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.WaitWatermark(t.Context(), "t", "k", 1)
		done <- err
	}()
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, jsonltape.ErrClosed) {
		t.Fatalf("WaitWatermark after Close: %v", err)
	}
	if _, err := s.Fetch(t.Context(), "t", tape.All()); !errors.Is(err, jsonltape.ErrClosed) {
		t.Fatalf("Fetch after Close: %v", err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := jsonltape.NewStore(""); err == nil {
		t.Fatal("empty directory accepted")
	}
	if _, err := jsonltape.NewStore(t.TempDir(), jsonltape.WithPollInterval(0)); err == nil {
		t.Fatal("zero poll interval accepted")
	}
}

// Concurrent appends from several processes: TestMain runs the test
// binary as a writer process when helperEnv names a directory.
const (
	helperEnv             = "JSONLTAPE_TEST_WRITER"
	procs, batches, batch = 3, 10, 4
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		if err := writeBatches(dir, os.Getenv(helperEnv+"_ID")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeBatches is one writer process of TestProcessesNeverInterleave.
func writeBatches(dir, w string) error {
	ctx := context.Background()
	s, err := jsonltape.NewStore(dir)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	for b := range batches {
		entries := make([]tape.Entry, batch)
		for i := range entries {
			entries[i] = tape.Event("e", map[string]any{"w": w, "b": b, "i": i})
		}
		if _, err := s.Append(ctx, "shared", entries); err != nil {
			return err
		}
	}
	return nil
}

func TestProcessesNeverInterleave(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperEnv+"_ID="+strconv.Itoa(p))
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("writer %d: %v\n%s", p, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustFetch(t, newStore(t, dir), "shared")
	if len(got) != procs*batches*batch {
		t.Fatalf("%d entries, want %d", len(got), procs*batches*batch)
	}
	for i, e := range got {
		if e.ID != int64(i+1) {
			t.Fatalf("entry %d has id %d", i, e.ID)
		}
		first := got[i-i%batch].Payload["data"].(map[string]any)
		d := e.Payload["data"].(map[string]any)
		if d["w"] != first["w"] || d["b"] != first["b"] || d["i"] != float64(i%batch) {
			t.Fatalf("entry %d interleaves batches: %v in the batch of %v", e.ID, d, first)
		}
	}
}

// A damaged index is an error naming the file; nothing is rewritten.
func TestDamagedIndex(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	mustAppend(t, s, "t", []tape.Entry{tape.System("kept")}, tape.WithWatermark("w", 2))
	before, err := os.ReadFile(filepath.Join(dir, "t.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"index": `, `{"size": 10, "pending": {"from": 3, "next": {"size": 20}}}`, `{"index": {"entries": -1}}`} {
		if err := os.WriteFile(filepath.Join(dir, "t.index.json"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		other := newStore(t, dir)
		if _, err := other.Fetch(t.Context(), "t", tape.All()); err == nil || !strings.Contains(err.Error(), "t.index.json") {
			t.Errorf("index %s: Fetch error %v, want one naming the file", bad, err)
		}
		if _, err := other.Append(t.Context(), "t", []tape.Entry{tape.System("x")}); err == nil {
			t.Errorf("index %s: Append succeeded", bad)
		}
		after, err := os.ReadFile(filepath.Join(dir, "t.jsonl"))
		if err != nil || string(after) != string(before) {
			t.Fatalf("index %s: tape file changed to %q, %v", bad, after, err)
		}
	}
}
