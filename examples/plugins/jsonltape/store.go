package jsonltape

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// DefaultPollInterval is how often [Store.WaitWatermark] reads the index
// of a tape for writes of other processes, unless [WithPollInterval] says
// otherwise. Writes of the same Store wake it at once.
const DefaultPollInterval = 50 * time.Millisecond

// ErrClosed is returned by the methods of a closed [Store].
var ErrClosed = errors.New("jsonltape: store closed")

// Store is a [tape.Store] and [tape.Archiver] keeping each tape in a JSONL
// file of one directory, in Bub's FileTapeStore format; see the package
// documentation for the files, the guarantees and the limits. It is safe
// for concurrent use, also by several processes on one host. The zero
// value is not usable; call [NewStore].
type Store struct {
	dir  string // absolute
	poll time.Duration

	mu      sync.Mutex
	tapes   map[string]*tapeFile // nil once closed
	changed chan struct{}        // closed and replaced after every write
	done    chan struct{}        // closed by Close
}

var (
	_ tape.Store    = (*Store)(nil)
	_ tape.Archiver = (*Store)(nil)
	_ hooks.Closer  = (*Store)(nil)
)

// Option configures a [Store].
type Option func(*Store) error

// WithPollInterval sets how often WaitWatermark reads a tape's index to
// see writes of other processes (default [DefaultPollInterval]).
func WithPollInterval(d time.Duration) Option {
	return func(s *Store) error {
		if d <= 0 {
			return fmt.Errorf("jsonltape: poll interval %v is not positive", d)
		}
		s.poll = d
		return nil
	}
}

// NewStore returns a store of the tapes in dir, creating the directory.
func NewStore(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, errors.New("jsonltape: empty tape directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("jsonltape: tape directory: %w", err)
	}
	s := &Store{
		dir:     abs,
		poll:    DefaultPollInterval,
		tapes:   map[string]*tapeFile{},
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("jsonltape: creating tape directory: %w", err)
	}
	return s, nil
}

// Dir returns the store's directory (absolute).
func (s *Store) Dir() string { return s.dir }

// tape returns the tape named name.
func (s *Store) tape(name string) (*tapeFile, error) {
	base, err := fileBase(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tapes == nil {
		return nil, ErrClosed
	}
	t := s.tapes[name]
	if t == nil {
		t = &tapeFile{name: name, base: filepath.Join(s.dir, base), index: tape.Index{Tape: name}}
		s.tapes[name] = t
	}
	return t, nil
}

// notify wakes this Store's WaitWatermark calls.
func (s *Store) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}

// Fetch implements [tape.Reader].
func (s *Store) Fetch(ctx context.Context, name string, q tape.Query) ([]tape.Entry, error) {
	t, err := s.tape(name)
	if err != nil {
		return nil, fmt.Errorf("reading tape %q: %w", name, err)
	}
	var entries []tape.Entry
	if err := t.access(ctx, false, func() error { entries = t.entries; return nil }); err != nil {
		return nil, fmt.Errorf("reading tape %q: %w", name, err)
	}
	out, err := q.Apply(entries)
	if err != nil {
		return nil, err
	}
	return cloneEntries(out), nil
}

// Append implements [tape.Appender]. The batch is one write(2) of all its
// lines to the tape file, synced to disk (with the sidecar) before Append
// returns.
func (s *Store) Append(ctx context.Context, name string, entries []tape.Entry, opts ...tape.AppendOption) ([]tape.Entry, error) {
	t, err := s.tape(name)
	if err != nil {
		return nil, fmt.Errorf("appending to tape %q: %w", name, err)
	}
	var stored []tape.Entry
	err = t.access(ctx, true, func() error {
		var err error
		stored, err = t.append(entries, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("appending to tape %q: %w", name, err)
	}
	s.notify()
	return stored, nil
}

// Reset implements [tape.Resetter]: the tape file is replaced by an empty
// one; the sidecar keeps the watermarks.
func (s *Store) Reset(ctx context.Context, name string) error {
	_, err := s.Append(ctx, name, nil, tape.WithReset())
	return err
}

// List implements [tape.Lister]: the tapes of the directory's *.jsonl
// files whose names this store maps tapes to, with entries.
func (s *Store) List(ctx context.Context) ([]string, error) {
	files, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing tapes: %w", err)
	}
	var names []string
	for _, f := range files {
		base, ok := strings.CutSuffix(f.Name(), entriesSuffix)
		if !ok || !f.Type().IsRegular() {
			continue
		}
		name, ok := tapeName(base)
		if !ok {
			continue
		}
		ix, err := s.Index(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("listing tapes: %w", err)
		}
		if ix.Entries > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Index implements [tape.Indexer].
func (s *Store) Index(ctx context.Context, name string) (tape.Index, error) {
	t, err := s.tape(name)
	if err != nil {
		return tape.Index{Tape: name}, fmt.Errorf("reading index of tape %q: %w", name, err)
	}
	var ix tape.Index
	if err := t.access(ctx, false, func() error { ix = t.index.Clone(); return nil }); err != nil {
		return tape.Index{Tape: name}, fmt.Errorf("reading index of tape %q: %w", name, err)
	}
	return ix, nil
}

// WaitWatermark implements [tape.Indexer]. Appends through this Store wake
// it at once; appends of other processes (or other Stores on the same
// directory) are seen by reading the index every poll interval.
func (s *Store) WaitWatermark(ctx context.Context, name, key string, atLeast uint64) (tape.Index, error) {
	var ticker *time.Ticker
	for {
		s.mu.Lock()
		changed, done := s.changed, s.done
		s.mu.Unlock()
		ix, err := s.Index(ctx, name)
		if err != nil {
			return ix, err
		}
		if ix.Watermark(key) >= atLeast {
			return ix, nil
		}
		if ticker == nil {
			ticker = time.NewTicker(s.poll)
			defer ticker.Stop()
		}
		select {
		case <-changed:
		case <-ticker.C:
		case <-done:
			return ix, waitError(name, key, atLeast, ix, ErrClosed)
		case <-ctx.Done():
			return ix, waitError(name, key, atLeast, ix, ctx.Err())
		}
	}
}

func waitError(name, key string, atLeast uint64, ix tape.Index, err error) error {
	return fmt.Errorf("waiting for watermark %s >= %d of tape %q (at %d): %w", key, atLeast, name, ix.Watermark(key), err)
}

// Close implements [hooks.Closer]: it drops the caches and ends every
// WaitWatermark; later calls return [ErrClosed]. The files stay. Closing
// again does nothing.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tapes != nil {
		s.tapes = nil
		close(s.done)
	}
	return nil
}
