package jsonltape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/bubbus/bub/pkg/tape"
)

// errSettle means a read found a write another process left half-done; it
// retries under the exclusive lock, which completes or undoes the write.
var errSettle = errors.New("jsonltape: a write is pending")

// tapeFile is one tape: its files and this process's cache of them.
type tapeFile struct {
	name string
	base string // path of the tape's files without suffix: <dir>/<fileBase(name)>

	// mu serializes this process's accesses to the tape and guards the
	// cache below.
	mu sync.Mutex
	// info is the entries file as last read (nil when there was none); a
	// different file (a reset renamed a new one in) or a shorter one
	// discards the cache.
	info os.FileInfo
	// offset is how many bytes of the file entries holds: complete lines
	// only, so a line still being written by another program is read once
	// it is finished.
	offset int64
	// entries is never modified in place, only appended to or replaced, so
	// a reader may keep the slice after unlocking.
	entries []tape.Entry
	// index is the committed index: the sidecar's, advanced over entries
	// another program appended.
	index tape.Index
}

func (t *tapeFile) path(suffix string) string { return t.base + suffix }

// access runs fn with the tape locked against other processes (shared for
// reads, exclusive for writes) and the cache up to date. A read of a tape
// that has no files takes no lock and creates none.
func (t *tapeFile) access(ctx context.Context, write bool, fn func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !write {
		exists, err := t.exists()
		if err != nil {
			return err
		}
		if !exists {
			t.info, t.offset, t.entries, t.index = nil, 0, nil, tape.Index{Tape: t.name}
			return fn()
		}
	}
	l, err := lockPath(ctx, t.path(lockSuffix), write)
	if err != nil {
		return err
	}
	defer l.unlock()
	err = t.sync(write)
	if errors.Is(err, errSettle) {
		if err = l.lock(ctx, true); err == nil {
			err = t.sync(true)
		}
	}
	if err != nil {
		return err
	}
	return fn()
}

// exists reports whether the tape has an entries file or a sidecar.
func (t *tapeFile) exists() (bool, error) {
	for _, suffix := range []string{entriesSuffix, indexSuffix} {
		_, err := os.Stat(t.path(suffix))
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// sync brings the cache up to date with the files. The caller holds the
// lock, exclusive when excl is set; a pending write needs it exclusive.
func (t *tapeFile) sync(excl bool) error {
	sc, err := readSidecar(t.path(indexSuffix))
	if err != nil {
		return err
	}
	if sc.Pending != nil {
		if !excl {
			return errSettle
		}
		if sc, err = t.settle(sc, false); err != nil {
			return err
		}
	}
	if err := t.readEntries(); err != nil {
		return err
	}
	t.index = t.derive(sc)
	return nil
}

// readEntries reads the complete lines added to the entries file since the
// last read, or the whole file when it was replaced or shrank. Lines Bub
// skips are skipped (see tape.ReadJSONL).
func (t *tapeFile) readEntries() error {
	f, err := os.Open(t.path(entriesSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		t.info, t.offset, t.entries = nil, 0, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading tape file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading tape file: %w", err)
	}
	if t.info == nil || !os.SameFile(t.info, info) || info.Size() < t.offset {
		t.offset, t.entries = 0, nil
	}
	t.info = info
	if info.Size() == t.offset {
		return nil
	}
	buf := make([]byte, info.Size()-t.offset)
	n, err := f.ReadAt(buf, t.offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading tape file %s: %w", f.Name(), err)
	}
	end := bytes.LastIndexByte(buf[:n], '\n') + 1
	if end == 0 {
		return nil
	}
	added, err := tape.ReadJSONL(bytes.NewReader(buf[:end]))
	if err != nil {
		return fmt.Errorf("reading tape file %s: %w", f.Name(), err)
	}
	t.entries = append(slices.Clip(t.entries), added...)
	t.offset += int64(end)
	return nil
}

// derive returns the committed index of the cached entries under sidecar
// sc. Entries beyond the ones sc describes were appended by another
// program (Bub's FileTapeStore writes only the entries file) and are
// indexed without commit ids or watermarks. When the file no longer starts
// with the entries sc describes (another program deleted or replaced it),
// it is indexed afresh, keeping the watermarks.
func (t *tapeFile) derive(sc sidecar) tape.Index {
	ix := sc.Index.Clone()
	ix.Tape, ix.Revision = t.name, sc.Revision
	n := ix.Entries
	if t.offset >= sc.Size && n <= int64(len(t.entries)) && (n == 0 || t.entries[n-1].ID == ix.LastID) {
		if extra := t.entries[n:]; len(extra) > 0 {
			ix = ix.Advance(extra, ix.Seq+1)
			ix.Revision += uint64(len(extra))
		}
		return ix
	}
	// The index of an empty tape that keeps ix's watermarks and positions
	// is the one a reset leaves; PlanAppend cannot fail without entries.
	p, _ := tape.PlanAppend(ix, nil, ix.Seq+1, tape.WithReset())
	nx := p.Index.Advance(t.entries, ix.Seq+1)
	nx.Revision = ix.Revision + 1 + uint64(len(t.entries))
	return nx
}

// settle finishes the pending write of sc: completes it when its entries
// are in place, else undoes it (always when undo is set and the write can
// still be undone), and returns the sidecar it then writes.
func (t *tapeFile) settle(sc sidecar, undo bool) (sidecar, error) {
	p := sc.Pending
	done := sc
	done.Pending = nil
	if p.Reset {
		_, err := os.Stat(t.path(resetSuffix))
		switch {
		case err == nil: // not renamed in yet
			if err := os.Remove(t.path(resetSuffix)); err != nil {
				return sc, fmt.Errorf("undoing a reset: %w", err)
			}
		case errors.Is(err, fs.ErrNotExist): // the new file is in place
			done = p.Next
		default:
			return sc, fmt.Errorf("settling a reset: %w", err)
		}
	} else {
		size, err := fileSize(t.path(entriesSuffix))
		if err != nil {
			return sc, fmt.Errorf("settling an append: %w", err)
		}
		if undo || size < p.Next.Size {
			if size > p.From {
				if err := truncateSync(t.path(entriesSuffix), p.From); err != nil {
					return sc, fmt.Errorf("undoing an append: %w", err)
				}
			}
		} else {
			done = p.Next
		}
	}
	if err := writeSidecar(t.path(indexSuffix), t.path(indexTemp), done); err != nil {
		return sc, err
	}
	return done, nil
}

// append writes one batch; the caller holds the exclusive lock and has
// synced. The sidecar records the write before the entries file changes,
// so a write that stops half-way is completed or undone by the next access
// (see settle).
func (t *tapeFile) append(entries []tape.Entry, opts []tape.AppendOption) ([]tape.Entry, error) {
	p, err := tape.PlanAppend(t.index, entries, t.index.Seq+1, opts...)
	if err != nil {
		return nil, err
	}
	if p.Replay {
		return t.committed(p.Commit)
	}
	cur := sidecar{Index: t.index, Revision: t.index.Revision, Size: t.offset}
	next := sidecar{Index: p.Index, Revision: t.index.Revision + 1, Size: t.offset}
	indexPath, indexTmp := t.path(indexSuffix), t.path(indexTemp)
	if !p.Reset && len(p.Stored) == 0 {
		// Only watermarks or an empty commit: one sidecar write.
		if err := writeSidecar(indexPath, indexTmp, next); err != nil {
			return nil, err
		}
		return []tape.Entry{}, nil
	}
	var size int64
	if t.info != nil {
		size = t.info.Size()
	}
	var buf bytes.Buffer
	if !p.Reset && size > t.offset {
		buf.WriteByte('\n') // end another program's unfinished line first
	}
	if err := tape.WriteJSONL(&buf, p.Stored); err != nil {
		return nil, err
	}
	// Return the entries exactly as a read will.
	stored, err := tape.ReadJSONL(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	if p.Reset {
		err = t.writeReset(cur, next, buf.Bytes())
	} else {
		err = t.writeAppend(cur, next, size, buf.Bytes())
	}
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// writeAppend appends data (the batch's lines) to the entries file in one
// write, committed by the sidecar next.
func (t *tapeFile) writeAppend(cur, next sidecar, size int64, data []byte) error {
	next.Size = size + int64(len(data))
	cur.Pending = &pendingWrite{From: size, Next: next}
	indexPath, indexTmp := t.path(indexSuffix), t.path(indexTemp)
	if err := writeSidecar(indexPath, indexTmp, cur); err != nil {
		return err
	}
	if err := appendSync(t.path(entriesSuffix), data, t.info == nil); err != nil {
		if _, serr := t.settle(cur, true); serr != nil {
			err = errors.Join(err, serr)
		}
		return fmt.Errorf("writing tape file: %w", err)
	}
	return writeSidecar(indexPath, indexTmp, next)
}

// writeReset replaces the entries file with data (the batch's lines, maybe
// none), committed by the sidecar next.
func (t *tapeFile) writeReset(cur, next sidecar, data []byte) error {
	next.Size = int64(len(data))
	tmp, entriesPath := t.path(resetSuffix), t.path(entriesSuffix)
	if err := writeSync(tmp, os.O_TRUNC, data); err != nil {
		return fmt.Errorf("writing reset tape file: %w", err)
	}
	cur.Pending = &pendingWrite{Reset: true, Next: next}
	indexPath, indexTmp := t.path(indexSuffix), t.path(indexTemp)
	if err := writeSidecar(indexPath, indexTmp, cur); err != nil {
		// The pending sidecar may be in place (only the directory sync
		// failed): undo through it, which also removes tmp.
		if _, serr := t.settle(cur, true); serr != nil {
			err = errors.Join(err, serr)
		}
		return err
	}
	if err := os.Rename(tmp, entriesPath); err != nil {
		if _, serr := t.settle(cur, true); serr != nil {
			err = errors.Join(err, serr)
		}
		return fmt.Errorf("replacing tape file: %w", err)
	}
	if err := syncDir(filepath.Dir(entriesPath)); err != nil {
		return err
	}
	return writeSidecar(indexPath, indexTmp, next)
}

// committed returns copies of the entries of commit c.
func (t *tapeFile) committed(c tape.CommitRef) ([]tape.Entry, error) {
	if c.Count == 0 {
		return []tape.Entry{}, nil
	}
	i := slices.IndexFunc(t.entries, func(e tape.Entry) bool { return e.ID == c.FirstID })
	if i < 0 || i+c.Count > len(t.entries) {
		return nil, fmt.Errorf("commit %q: its entries %d-%d are no longer in the tape file", c.ID, c.FirstID, c.FirstID+int64(c.Count)-1)
	}
	return cloneEntries(t.entries[i : i+c.Count]), nil
}

func cloneEntries(entries []tape.Entry) []tape.Entry {
	out := make([]tape.Entry, len(entries))
	for i, e := range entries {
		out[i] = e.Clone()
	}
	return out
}

// appendSync appends data to the file at path in one write(2) and syncs
// it; created says the file is new, so its directory entry is synced too.
func appendSync(path string, data []byte, created bool) error {
	if err := writeSync(path, os.O_APPEND, data); err != nil {
		return err
	}
	if created {
		return syncDir(filepath.Dir(path))
	}
	return nil
}

// truncateSync cuts the file at path to size and syncs it.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
