package jsonltape

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bubbus/bub/pkg/tape"
)

// FuzzTapeName decodes file names found in the directory: a name is
// accepted only when it is the one fileBase writes for the tape.
func FuzzTapeName(f *testing.F) {
	for _, s := range []string{"abc__def", "telegram%3A1", "%41", "%61", "%4", "a.b", "", "%2541"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, base string) {
		name, ok := tapeName(base)
		if !ok {
			return
		}
		again, err := fileBase(name)
		if err != nil || again != base {
			t.Fatalf("tapeName(%q) = %q, but fileBase gives %q, %v", base, name, again, err)
		}
	})
}

// FuzzStoreFiles opens a tape whose entries file and sidecar hold
// arbitrary bytes: every operation returns entries or an error, never
// panics, and an append that succeeds is read back at the tape's end.
func FuzzStoreFiles(f *testing.F) {
	f.Add([]byte(`{"id": 1, "kind": "system", "payload": {}, "meta": {}, "date": "d"}`+"\n"), []byte(`{"index": {"tape": "t", "seq": 1, "last_id": 1, "entries": 1}, "revision": 1, "size": 67}`))
	f.Add([]byte("{\"id\": 9, \"kind\": \"anchor\", \"payload\": {\"name\": \"a\"}}\nbad\n{\"id\": 3"), []byte(`{"index": {"entries": 5, "commits": [{"id": "c", "first_id": 7, "count": 3}]}, "size": 9}`))
	f.Add([]byte(""), []byte(`{"size": 0, "pending": {"from": 0, "next": {"size": 10, "index": {"entries": 1, "last_id": 1}}}}`))
	f.Add([]byte("x\n"), []byte(`{"pending": {"reset": true, "next": {"size": 0}}}`))
	f.Add([]byte(""), []byte(`{"index": {"entries": -1}}`))
	f.Fuzz(func(t *testing.T, entries, index []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "t"+entriesSuffix), entries, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "t"+indexSuffix), index, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s, err := NewStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		_, _ = s.Fetch(ctx, "t", tape.All().LastAnchor())
		_, _ = s.Index(ctx, "t")
		_, _ = s.List(ctx)
		stored, err := s.Append(ctx, "t", []tape.Entry{tape.System("x")}, tape.WithCommitID("c"), tape.WithWatermark("w", 1))
		if err != nil {
			return
		}
		got, err := s.Fetch(ctx, "t", tape.All())
		if err != nil {
			t.Fatalf("Fetch after a successful Append: %v", err)
		}
		if len(stored) == 1 && (len(got) == 0 || got[len(got)-1].ID != stored[0].ID) {
			t.Fatalf("appended %+v, the tape ends with %+v", stored, got)
		}
	})
}
