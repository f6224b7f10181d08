package jsonltape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/tape"
)

// Archive implements [tape.Archiver] like Bub's reset(archive=true): the
// entries go to <dir>/archive/<base>.jsonl.<UTC YYYYMMDDTHHMMSSZ>.bak in
// the tape file format, synced to disk; a second archive of the tape in the
// same second gets "-2", "-3", … before ".bak". The location is the
// file's absolute path.
func (s *Store) Archive(ctx context.Context, name string, entries []tape.Entry) (string, error) {
	base, err := fileBase(name)
	if err != nil {
		return "", fmt.Errorf("archiving tape %q: %w", name, err)
	}
	var buf bytes.Buffer
	if err := tape.WriteJSONL(&buf, entries); err != nil {
		return "", fmt.Errorf("archiving tape %q: %w", name, err)
	}
	dir := s.archiveDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("archiving tape %q: %w", name, err)
	}
	stem := base + entriesSuffix + "." + time.Now().UTC().Format("20060102T150405Z")
	for n := 1; ; n++ {
		file := stem + archiveSuffix
		if n > 1 {
			file = stem + "-" + strconv.Itoa(n) + archiveSuffix
		}
		loc := filepath.Join(dir, file)
		err := writeSync(loc, os.O_EXCL, buf.Bytes())
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("archiving tape %q: %w", name, err)
		}
		return loc, syncDir(dir)
	}
}

// ReadArchive implements [tape.Archiver]. A location that is not a file
// of the store's archive directory is [tape.ErrBadLocation].
func (s *Store) ReadArchive(ctx context.Context, location string) ([]tape.Entry, error) {
	clean := filepath.Clean(location)
	if filepath.Dir(clean) != s.archiveDir() || !strings.HasSuffix(clean, archiveSuffix) {
		return nil, fmt.Errorf("reading archive %q: %w", location, tape.ErrBadLocation)
	}
	f, err := os.Open(clean)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading archive %q: %w", location, tape.ErrBadLocation)
	}
	if err != nil {
		return nil, fmt.Errorf("reading archive %q: %w", location, err)
	}
	defer f.Close()
	entries, err := tape.ReadJSONL(f)
	if err != nil {
		return nil, fmt.Errorf("reading archive %q: %w", location, err)
	}
	return entries, nil
}

func (s *Store) archiveDir() string { return filepath.Join(s.dir, archiveDir) }
