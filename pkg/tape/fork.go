package tape

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Fork is a per-run overlay on a parent store, Bub's ForkTapeStore. Reads
// see the parent's committed entries followed by the run's pending ones;
// appends and resets stay in memory and never reach the parent. In this
// design a worker runs a turn on a Fork while the recorder commits the
// run's entries to the real store; [Fork.Pending] and [Fork.WasReset] show
// what the run produced.
//
// A Fork answers every query exactly as a store holding the parent's tape
// plus the pending entries would, so it passes the store conformance
// suite. In particular a pending anchor that starts the query's slice (any
// anchor for LastAnchor, the named one for AfterAnchor and BetweenAnchors)
// hides everything before it, parent entries included, as in Bub. Bub's
// fork differs in corner cases this port does not copy: it applies only
// the Kinds filter to pending entries (so a search during a run returned
// every pending message), and it treats any parent error as "no entries"
// (which would hide an unreachable store from the model). After a reset in
// the fork the parent is not read at all.
//
// Appended entries get provisional ids following the parent's last id as
// the fork last saw it before it first wrote the tape (from its newest
// read of the parent's index, else read then; 1, 2, … after a reset) and
// lose their non-text content parts ([StripMedia]). Commit ids and
// watermarks given to Append are kept in the fork, not the parent. Forks
// nest: a Fork is itself a [Store].
type Fork struct {
	parent Store
	mu     sync.Mutex
	tapes  map[string]*overlay
	// lastIDs are the parent's last ids from the newest index reads of
	// tapes the fork has not written yet: the base of their first append.
	lastIDs map[string]int64
	// seeds are parent indexes read by the fork's user (see [Fork.Seed]),
	// with the reads each still serves.
	seeds map[string]seed
	// changed is closed and replaced whenever an overlay changes.
	changed chan struct{}
}

type overlay struct {
	entries    []Entry
	reset      bool
	base       int64              // id before the first pending entry
	based      bool               // base is set
	commits    map[string][]Entry // by commit id, for replays
	refs       []CommitRef        // the same commits in order, for the index
	watermarks map[string]uint64
	revision   uint64
}

var (
	_ Store    = (*Fork)(nil)
	_ Archiver = (*Fork)(nil)
)

// NewFork returns an empty overlay on parent.
func NewFork(parent Store) *Fork {
	return &Fork{parent: parent, tapes: map[string]*overlay{}, lastIDs: map[string]int64{}, seeds: map[string]seed{}, changed: make(chan struct{})}
}

// Seed hands the fork an index of tape that its user has just read from
// the parent, so that the fork's next [Fork.Index] of tape (only that one)
// starts from it instead of reading the parent again, and so does its
// next read of the parent's entries of tape (a [Fork.Fetch] that reaches
// the parent), when the parent can read them from an index it is given
// (a [JetStreamStore]; another parent reads its own). A worker reads the
// index when its turn starts, waiting for the session's earlier turns to
// be committed, and seeds its run's fork with it: the run numbers its
// entries after that index and reads its context up to it.
func (f *Fork) Seed(tape string, ix Index) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seeds[tape] = seed{ix: ix, index: true, fetch: true}
}

// seed is an index given to [Fork.Seed] and the reads it still serves:
// the fork's next Index of its tape, its next read of the tape's entries
// from the parent.
type seed struct {
	ix           Index
	index, fetch bool
}

// takeSeed returns the seeded index of tape for the fork's next Index
// (fetch false) or its next read of the parent's entries (fetch true),
// once.
func (f *Fork) takeSeed(tape string, fetch bool) (Index, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.seeds[tape]
	serves := &s.index
	if fetch {
		serves = &s.fetch
	}
	if !*serves {
		return Index{}, false
	}
	*serves = false
	if s.index || s.fetch {
		f.seeds[tape] = s
	} else {
		delete(f.seeds, tape)
	}
	return s.ix, true
}

// readOptions say how a [fetcher] reads.
type readOptions struct {
	// known is an index of the tape that the caller has just read: the
	// read starts from it instead of reading the index (a store that
	// finds the tape changed since reads the index after all).
	known *Index
	// shared is set by a caller that only reads the entries
	// ([Tape.ReadMessages] with [DefaultSelector]): they may be the ones
	// the store keeps, not copies, so neither they nor their payloads and
	// meta may be changed (the slice is the caller's). Copying every
	// entry of a session's context on every turn was most of a long
	// session's turn.
	shared bool
}

// fetcher is a store that reads entries as readOptions say: the
// JetStream store and the fork (which reads its parent from its own seed,
// not from known).
type fetcher interface {
	fetchWith(ctx context.Context, tape string, q Query, o readOptions) ([]Entry, error)
}

// parentFetch reads q of tape from the parent, from the seeded index of
// tape when there is one (see [Fork.Seed]); shared ones when shared and
// the parent can.
func (f *Fork) parentFetch(ctx context.Context, tape string, q Query, shared bool) ([]Entry, error) {
	o := readOptions{shared: shared}
	if ix, ok := f.takeSeed(tape, true); ok {
		o.known = &ix
	}
	if p, ok := f.parent.(fetcher); ok {
		return p.fetchWith(ctx, tape, q, o)
	}
	return f.parent.Fetch(ctx, tape, q)
}

// Unwrap returns the parent store.
func (f *Fork) Unwrap() Store { return f.parent }

// Pending returns copies of the entries appended to tape in this fork,
// with their provisional ids.
func (f *Fork) Pending(tape string) []Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ov := f.tapes[tape]; ov != nil {
		return cloneEntries(ov.entries)
	}
	return nil
}

// WasReset reports whether tape was reset in this fork, in which case its
// pending entries replace the parent's tape rather than extend it.
func (f *Fork) WasReset(tape string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ov := f.tapes[tape]
	return ov != nil && ov.reset
}

// view is a consistent copy of one overlay's state.
type view struct {
	entries    []Entry // never written below its length (see Fork.Append)
	reset      bool
	refs       []CommitRef
	watermarks map[string]uint64
	revision   uint64
	changed    <-chan struct{}
}

func (f *Fork) view(tape string) view {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := view{changed: f.changed}
	if ov := f.tapes[tape]; ov != nil {
		v.entries, v.reset, v.revision, v.refs = ov.entries, ov.reset, ov.revision, slices.Clone(ov.refs)
		v.watermarks = maps.Clone(ov.watermarks)
	}
	return v
}

// Fetch implements [Reader].
func (f *Fork) Fetch(ctx context.Context, tape string, q Query) ([]Entry, error) {
	return f.fetchWith(ctx, tape, q, readOptions{})
}

// fetchWith implements fetcher.
func (f *Fork) fetchWith(ctx context.Context, tape string, q Query, o readOptions) ([]Entry, error) {
	own := cloneEntries
	if o.shared {
		own = slices.Clone[[]Entry]
	}
	v := f.view(tape)
	if v.reset || pendingHoldsStart(v.entries, q) {
		out, err := q.Apply(v.entries)
		return own(out), err
	}
	if q.mode() == sliceBetween {
		// The end anchor may be pending: rebuild the tape from the start
		// anchor on and cut it here.
		after, err := f.parentFetch(ctx, tape, All().AfterAnchor(q.betweenStart), o.shared)
		if err != nil {
			return nil, err
		}
		virtual := slices.Concat([]Entry{Anchor(q.betweenStart, nil)}, after, v.entries)
		out, err := q.Apply(virtual)
		return own(out), err
	}
	// The slice starts in the parent (or there is none); the other filters
	// judge entries one by one, so each side can apply them.
	parent, err := f.parentFetch(ctx, tape, q.withoutLimit(), o.shared)
	if err != nil {
		return nil, err
	}
	mine, err := q.entryFilters().Apply(v.entries)
	if err != nil {
		return nil, err
	}
	out := append(parent, own(mine)...)
	if q.limited && len(out) > q.limit {
		out = out[:q.limit]
	}
	return out, nil
}

// pendingHoldsStart reports whether the anchor that starts q's slice is
// among the pending entries, which then hold the whole slice.
func pendingHoldsStart(pending []Entry, q Query) bool {
	var want string
	switch q.mode() {
	case sliceAll:
		return false
	case sliceLast:
		return slices.ContainsFunc(pending, func(e Entry) bool { _, ok := e.AnchorName(); return ok })
	case sliceAfter:
		want = q.afterAnchor
	case sliceBetween:
		want = q.betweenStart
	}
	return slices.ContainsFunc(pending, func(e Entry) bool { name, ok := e.AnchorName(); return ok && name == want })
}

// Append implements [Appender]; see [Fork] for the ids it assigns.
func (f *Fork) Append(ctx context.Context, tape string, entries []Entry, opts ...AppendOption) ([]Entry, error) {
	o, err := resolveAppendOptions(opts)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	ov := f.tapes[tape]
	based := ov != nil && ov.based
	parentLast, read := f.lastIDs[tape]
	f.mu.Unlock()
	if !based && !read && !o.reset {
		ix, err := f.parent.Index(ctx, tape)
		if err != nil {
			return nil, err
		}
		parentLast = ix.LastID
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	ov = f.tapes[tape]
	if ov == nil {
		ov = &overlay{commits: map[string][]Entry{}, watermarks: map[string]uint64{}}
		f.tapes[tape] = ov
	}
	if prior, ok := ov.commits[o.commitID]; ok && o.commitID != "" {
		return result(o.noResult, prior), nil
	}
	if o.reset {
		ov.entries, ov.reset, ov.base, ov.based, ov.refs = nil, true, 0, true, nil
		clear(ov.commits)
	}
	if !ov.based {
		ov.base, ov.based = parentLast, true
	}
	delete(f.lastIDs, tape)
	stripped := make([]Entry, len(entries))
	for i, e := range entries {
		stripped[i] = StripMedia(e)
	}
	stored, err := numberEntries(stripped, ov.base+int64(len(ov.entries))+1)
	if err != nil {
		return nil, err
	}
	// In place: a view reads the entries below the length it saw, never
	// written again (see Query.Apply).
	ov.entries = append(ov.entries, stored...)
	if o.commitID != "" {
		ov.commits[o.commitID] = stored
		ref := CommitRef{ID: o.commitID, Count: len(stored)}
		if len(stored) > 0 {
			ref.FirstID = stored[0].ID
		}
		ov.refs = append(ov.refs, ref)
	}
	for k, v := range o.watermarks {
		ov.watermarks[k] = max(ov.watermarks[k], v)
	}
	ov.revision++
	close(f.changed)
	f.changed = make(chan struct{})
	return result(o.noResult, stored), nil
}

// Reset implements [Resetter]: it empties the overlay and hides the
// parent's tape for the rest of the fork.
func (f *Fork) Reset(ctx context.Context, tape string) error {
	_, err := f.Append(ctx, tape, nil, WithReset())
	return err
}

// List implements [Lister]: the parent's tapes plus those with pending
// entries, minus those reset in the fork and still empty.
func (f *Fork) List(ctx context.Context) ([]string, error) {
	names, err := f.parent.List(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, ov := range f.tapes {
		switch {
		case len(ov.entries) > 0:
			names = append(names, name)
		case ov.reset:
			names = slices.DeleteFunc(names, func(n string) bool { return n == name })
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Index implements [Indexer]: the parent's index (a [Fork.Seed] given,
// else read) extended by the pending entries (whose anchors and commits
// have Seq 0), the fork's commits and its watermarks; Seq and FirstSeq
// stay the parent's.
func (f *Fork) Index(ctx context.Context, tape string) (Index, error) {
	v := f.view(tape)
	pix, seeded := f.takeSeed(tape, false)
	if !seeded {
		var err error
		if pix, err = f.parent.Index(ctx, tape); err != nil {
			return Index{}, err
		}
	}
	f.mu.Lock()
	if ov := f.tapes[tape]; ov == nil || !ov.based {
		f.lastIDs[tape] = pix.LastID
	}
	f.mu.Unlock()
	return v.index(pix), nil
}

func (v view) index(pix Index) Index {
	ix := pix.next(v.entries, make([]uint64, len(v.entries)), appendOptions{reset: v.reset, watermarks: v.watermarks})
	ix.Seq, ix.FirstSeq, ix.Revision = pix.Seq, pix.FirstSeq, pix.Revision+v.revision
	ix.Commits = append(ix.Commits, v.refs...)
	if n := len(ix.Commits); n > MaxCommits {
		ix.Commits = ix.Commits[n-MaxCommits:]
	}
	return ix
}

// WaitWatermark implements [Indexer]: it returns when the fork's or the
// parent's watermark reaches atLeast.
func (f *Fork) WaitWatermark(ctx context.Context, tape, key string, atLeast uint64) (Index, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	type result struct {
		ix  Index
		err error
	}
	parent := make(chan result, 1)
	wg.Go(func() {
		ix, err := f.parent.WaitWatermark(ctx, tape, key, atLeast)
		parent <- result{ix, err}
	})
	for {
		v := f.view(tape)
		if v.watermarks[key] >= atLeast {
			return f.Index(ctx, tape)
		}
		select {
		case <-v.changed:
		case r := <-parent:
			return v.index(r.ix), r.err
		}
	}
}

// Archive implements [Archiver] with the parent's archiver: an archive is
// a copy outside the tape, written at once.
func (f *Fork) Archive(ctx context.Context, tape string, entries []Entry) (string, error) {
	a, err := archiverOf(f.parent)
	if err != nil {
		return "", err
	}
	return a.Archive(ctx, tape, entries)
}

// ReadArchive implements [Archiver] with the parent's archiver.
func (f *Fork) ReadArchive(ctx context.Context, location string) ([]Entry, error) {
	a, err := archiverOf(f.parent)
	if err != nil {
		return nil, err
	}
	return a.ReadArchive(ctx, location)
}
