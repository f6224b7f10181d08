package jsonltape

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bubbus/bub/pkg/tape"
)

// crashState makes the files of tape "t" in a new directory look like a
// writer died during a batch: the tape holds entries 1-2, then the write
// that dir "after" shows complete (append or reset, with commit id "c" and
// watermark w=5) stopped at the given step.
func crashState(t *testing.T, reset bool, step string) string {
	t.Helper()
	before, after := t.TempDir(), t.TempDir()
	for _, dir := range []string{before, after} {
		s, err := NewStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(t.Context(), "t", []tape.Entry{tape.System("1"), tape.System("2")}); err != nil {
			t.Fatal(err)
		}
		if dir == after {
			opts := []tape.AppendOption{tape.WithCommitID("c"), tape.WithWatermark("w", 5)}
			if reset {
				opts = append(opts, tape.WithReset())
			}
			if _, err := s.Append(t.Context(), "t", []tape.Entry{tape.System("3"), tape.System("4")}, opts...); err != nil {
				t.Fatal(err)
			}
		}
		s.Close(t.Context())
	}
	read := func(dir, suffix string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, "t"+suffix))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cur, err := decodeSidecar(read(before, indexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	next, err := decodeSidecar(read(after, indexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	old, data := read(before, entriesSuffix), read(after, entriesSuffix)
	cur.Pending = &pendingWrite{Reset: true, Next: next} // as writeReset records it
	if !reset {
		cur.Pending = &pendingWrite{From: int64(len(old)), Next: next} // as writeAppend does
	}
	if err := writeSidecar(filepath.Join(before, "t"+indexSuffix), filepath.Join(before, "t"+indexTemp), cur); err != nil {
		t.Fatal(err)
	}
	entriesPath := filepath.Join(before, "t"+entriesSuffix)
	switch {
	case reset && step == "written":
		writeFile(t, entriesPath+".reset", data)
	case reset && step == "renamed":
		writeFile(t, entriesPath, data)
	case step == "half":
		writeFile(t, entriesPath, data[:len(old)+(len(data)-len(old))/2])
	case step == "written":
		writeFile(t, entriesPath, data)
	default:
		t.Fatalf("unknown step %q", step)
	}
	return before
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCrashedWritesSettle(t *testing.T) {
	tests := []struct {
		name    string
		reset   bool
		step    string
		want    []int64
		commit  bool
		resetTo bool
		after   int // entries after the batch is retried with its commit id
	}{
		{name: "append cut half-way is undone", step: "half", want: []int64{1, 2}, after: 4},
		{name: "append written is completed", step: "written", want: []int64{1, 2, 3, 4}, commit: true, after: 4},
		{name: "reset not renamed is undone", reset: true, step: "written", want: []int64{1, 2}, after: 4},
		{name: "reset renamed is completed", reset: true, step: "renamed", want: []int64{1, 2}, commit: true, resetTo: true, after: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := crashState(t, tt.reset, tt.step)
			s, err := NewStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(t.Context())
			// A read settles the write (taking the lock exclusively).
			got, err := s.Fetch(t.Context(), "t", tape.All())
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs []int64
			for _, e := range got {
				gotIDs = append(gotIDs, e.ID)
			}
			if !slices.Equal(gotIDs, tt.want) {
				t.Fatalf("ids %v, want %v", gotIDs, tt.want)
			}
			if tt.resetTo && got[0].Payload["content"] != "3" {
				t.Fatalf("reset completed but the tape holds %#v", got)
			}
			ix, err := s.Index(t.Context(), "t")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := ix.Commit("c"); ok != tt.commit || (ix.Watermark("w") == 5) != tt.commit {
				t.Fatalf("index %+v: commit and watermark recorded = %v, want %v", ix, ok, tt.commit)
			}
			sc, err := readSidecar(filepath.Join(dir, "t"+indexSuffix))
			if err != nil || sc.Pending != nil {
				t.Fatalf("sidecar after settling: %+v, %v", sc, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "t"+resetSuffix)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("reset file left behind: %v", err)
			}
			// The retry of the batch is stored once.
			stored, err := s.Append(t.Context(), "t", []tape.Entry{tape.System("3"), tape.System("4")}, tape.WithCommitID("c"))
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 2 {
				t.Fatalf("retry stored %d entries", len(stored))
			}
			after, err := s.Fetch(t.Context(), "t", tape.All())
			if err != nil || len(after) != tt.after {
				t.Fatalf("after the retry the tape has %d entries (%v), want %d", len(after), err, tt.after)
			}
		})
	}
}
