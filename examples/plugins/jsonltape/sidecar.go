package jsonltape

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bubbus/bub/pkg/tape"
)

// sidecar is the content of <base>.index.json: the committed index of the
// tape and how much of the entries file it covers, plus the write in
// progress, if any.
type sidecar struct {
	Index tape.Index `json:"index"`
	// Revision is the index revision (tape.Index leaves it out of its
	// JSON); every write raises it.
	Revision uint64 `json:"revision"`
	// Size is the length of the entries file the index describes.
	Size int64 `json:"size"`
	// Pending is the write in progress: written before the entries file
	// changes and cleared once the write is complete. Finding it means the
	// writer stopped half-way; the next locked access completes the write
	// or undoes it (see tapeFile.settle).
	Pending *pendingWrite `json:"pending,omitempty"`
}

// pendingWrite is a write in progress.
type pendingWrite struct {
	// Reset is true when the write replaces the entries file with the
	// <base>.jsonl.reset file, false when it appends.
	Reset bool `json:"reset,omitempty"`
	// From is the length of the entries file before an append.
	From int64 `json:"from"`
	// Next is the sidecar once the write is complete.
	Next sidecar `json:"next"`
}

// decodeSidecar parses a sidecar file; what it cannot use is an error, so
// that a damaged index never silently loses commit ids or watermarks.
func decodeSidecar(data []byte) (sidecar, error) {
	var sc sidecar
	if err := json.Unmarshal(data, &sc); err != nil {
		return sidecar{}, err
	}
	if err := sc.validate(); err != nil {
		return sidecar{}, err
	}
	if p := sc.Pending; p != nil {
		if p.Next.Pending != nil {
			return sidecar{}, errors.New("nested pending write")
		}
		if !p.Reset && p.From < sc.Size {
			// Undoing it would cut committed entries.
			return sidecar{}, fmt.Errorf("pending write from offset %d inside the committed %d bytes", p.From, sc.Size)
		}
		if err := p.Next.validate(); err != nil {
			return sidecar{}, fmt.Errorf("pending write: %w", err)
		}
	}
	return sc, nil
}

func (sc sidecar) validate() error {
	ix := sc.Index
	if sc.Size < 0 || ix.Entries < 0 || ix.LastID < 0 || ix.Anchors < 0 {
		return fmt.Errorf("negative size or count (size %d, entries %d, last id %d, anchors %d)", sc.Size, ix.Entries, ix.LastID, ix.Anchors)
	}
	return nil
}

// readSidecar reads the sidecar at path; a missing file is the zero
// sidecar (a tape this store never wrote, such as one of Bub's files).
func readSidecar(path string) (sidecar, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sidecar{}, nil
	}
	if err != nil {
		return sidecar{}, fmt.Errorf("reading tape index: %w", err)
	}
	sc, err := decodeSidecar(data)
	if err != nil {
		return sidecar{}, fmt.Errorf("reading tape index %s: %w", path, err)
	}
	return sc, nil
}

// writeSidecar replaces the sidecar at path atomically: the new content
// goes to tmp, is synced, and is renamed over path; the directory is
// synced after the rename.
func writeSidecar(path, tmp string, sc sidecar) error {
	data, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("encoding tape index: %w", err)
	}
	if err := writeSync(tmp, os.O_TRUNC, data); err != nil {
		return fmt.Errorf("writing tape index: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing tape index: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// writeSync writes data to the file at path opened with flag (plus
// O_WRONLY and O_CREATE) in one write(2) and syncs it to disk.
func writeSync(path string, flag int, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir syncs a directory, making renames and new files in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
