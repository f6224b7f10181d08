package tape

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// MemoryStore is an in-process [Store] for unit tests (Bub's
// InMemoryTapeStore). It passes the same conformance suite as
// [JetStreamStore], including watermarks and commit ids. It is safe for
// concurrent use. The zero value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	mu       sync.Mutex
	tapes    map[string]*memTape
	seq      uint64             // store-wide position counter, like a stream sequence
	archives map[string][]Entry // by location
	changed  chan struct{}      // closed and replaced on every index change
}

type memTape struct {
	entries []Entry
	index   Index
}

var (
	_ Store    = (*MemoryStore)(nil)
	_ Archiver = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		tapes:    map[string]*memTape{},
		archives: map[string][]Entry{},
		changed:  make(chan struct{}),
	}
}

// tape returns the tape named name, creating it. The caller holds s.mu.
func (s *MemoryStore) tape(name string) *memTape {
	t := s.tapes[name]
	if t == nil {
		t = &memTape{index: Index{Tape: name}}
		s.tapes[name] = t
	}
	return t
}

// notify wakes every WaitWatermark. The caller holds s.mu.
func (s *MemoryStore) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Fetch implements [Reader].
func (s *MemoryStore) Fetch(ctx context.Context, tape string, q Query) ([]Entry, error) {
	s.mu.Lock()
	var entries []Entry
	if t := s.tapes[tape]; t != nil {
		entries = t.entries
	}
	s.mu.Unlock() // read below its length only, never written there (see Append)
	out, err := q.Apply(entries)
	if err != nil {
		return nil, err
	}
	return cloneEntries(out), nil
}

// Append implements [Appender].
func (s *MemoryStore) Append(ctx context.Context, tape string, entries []Entry, opts ...AppendOption) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tape(tape)
	p, err := PlanAppend(t.index, entries, s.seq+1, opts...)
	if err != nil {
		return nil, err
	}
	if p.Replay {
		var kept []Entry
		if p.Commit.Count > 0 {
			kept = t.entries[p.Commit.FirstID-1 : p.Commit.FirstID-1+int64(p.Commit.Count)]
		}
		return result(p.NoResult, kept), nil
	}
	if p.Reset {
		t.entries = nil
	}
	s.seq += uint64(len(p.Stored))
	// In place: Fetch reads t.entries unlocked, below the length it saw,
	// which is never written again (see Query.Apply).
	t.entries = append(t.entries, p.Stored...)
	rev := t.index.Revision
	t.index = p.Index
	t.index.Revision = rev + 1
	s.notify()
	return result(p.NoResult, p.Stored), nil
}

// Reset implements [Resetter].
func (s *MemoryStore) Reset(ctx context.Context, tape string) error {
	_, err := s.Append(ctx, tape, nil, WithReset())
	return err
}

// List implements [Lister].
func (s *MemoryStore) List(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, t := range s.tapes {
		if len(t.entries) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Index implements [Indexer].
func (s *MemoryStore) Index(ctx context.Context, tape string) (Index, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tapes[tape]; t != nil {
		return t.index.Clone(), nil
	}
	return Index{Tape: tape}, nil
}

// WaitWatermark implements [Indexer].
func (s *MemoryStore) WaitWatermark(ctx context.Context, tape, key string, atLeast uint64) (Index, error) {
	for {
		s.mu.Lock()
		ix := Index{Tape: tape}
		if t := s.tapes[tape]; t != nil {
			ix = t.index.Clone()
		}
		changed := s.changed
		s.mu.Unlock()
		if ix.reached(key, atLeast) {
			return ix, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ix, waitError(tape, key, atLeast, ix, ctx.Err())
		}
	}
}

// Archive implements [Archiver]. Locations look like "memory:<tape>#<n>".
func (s *MemoryStore) Archive(ctx context.Context, tape string, entries []Entry) (string, error) {
	copies := make([]Entry, len(entries))
	for i, e := range entries {
		n, err := normalize(e)
		if err != nil {
			return "", fmt.Errorf("archiving tape %q: %w", tape, err)
		}
		copies[i] = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	loc := "memory:" + tape + "#" + strconv.Itoa(len(s.archives)+1)
	s.archives[loc] = copies
	return loc, nil
}

// ReadArchive implements [Archiver].
func (s *MemoryStore) ReadArchive(ctx context.Context, location string) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, ok := s.archives[location]
	if !ok {
		return nil, fmt.Errorf("reading archive %q: %w", location, ErrBadLocation)
	}
	return cloneEntries(entries), nil
}

// result is what Append returns of kept, entries the store keeps: deep
// copies, or nil when the caller does not read them ([WithoutResult]).
func result(noResult bool, kept []Entry) []Entry {
	if noResult {
		return nil
	}
	return cloneEntries(kept)
}

func cloneEntries(entries []Entry) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = e.Clone()
	}
	return out
}
