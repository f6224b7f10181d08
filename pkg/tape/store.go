package tape

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Reader reads the committed entries of a tape.
type Reader interface {
	// Fetch returns the entries of tape that q selects (see [Query.Apply]),
	// oldest first. A tape that does not exist has no entries. The entries
	// are copies the caller may keep and modify.
	Fetch(ctx context.Context, tape string, q Query) ([]Entry, error)
}

// Appender appends entries to a tape.
type Appender interface {
	// Append stores entries at the end of tape as one atomic batch: readers
	// see all of them or none, and their ids are last id + 1, + 2, … with no
	// other writer's entries in between. It returns the stored entries (ids
	// assigned, payloads normalized to JSON values). See [WithCommitID],
	// [WithWatermark] and [WithReset].
	Append(ctx context.Context, tape string, entries []Entry, opts ...AppendOption) ([]Entry, error)
}

// Resetter drops a tape.
type Resetter interface {
	// Reset removes every entry of tape; the next entry gets id 1 again.
	// Watermarks survive a reset.
	Reset(ctx context.Context, tape string) error
}

// Lister lists tapes.
type Lister interface {
	// List returns the names of the tapes that have entries, sorted.
	List(ctx context.Context) ([]string, error)
}

// Indexer reads the per-tape [Index] and waits on its watermarks.
type Indexer interface {
	// Index returns the committed index of tape; a tape that does not exist
	// has the zero index (with Tape set).
	Index(ctx context.Context, tape string) (Index, error)
	// WaitWatermark blocks until the watermark key of tape is at least atLeast
	// and returns the index that satisfied it. When ctx ends first it
	// returns the last index it saw and an error wrapping ctx.Err(), so a
	// caller can bound the wait with a deadline and carry on with stale
	// data if it must.
	WaitWatermark(ctx context.Context, tape, key string, atLeast uint64) (Index, error)
}

// Store is a complete tape store. [MemoryStore], [JetStreamStore] and
// [Fork] implement it; package tapetest holds the conformance suite.
type Store interface {
	Reader
	Appender
	Resetter
	Lister
	Indexer
}

// Archiver is an optional capability of a store: keeping a copy of a tape's
// entries before a reset (Bub's reset(archive=true)). [Tape.Reset] detects
// it by type assertion.
type Archiver interface {
	// Archive stores a copy of entries, the current content of tape, and
	// returns a location string that [Archiver.ReadArchive] accepts.
	Archive(ctx context.Context, tape string, entries []Entry) (location string, err error)
	// ReadArchive returns the entries archived at location.
	ReadArchive(ctx context.Context, location string) ([]Entry, error)
}

// archiverOf is the one place that detects the [Archiver] capability.
func archiverOf(s Store) (Archiver, error) {
	if a, ok := s.(Archiver); ok {
		return a, nil
	}
	return nil, ErrNoArchive
}

// Errors returned by stores.
var (
	// ErrConflict means another writer kept changing the tape while an
	// append or reset retried; the operation did not take effect.
	ErrConflict = errors.New("tape: concurrent writer conflict")
	// ErrBadLocation is returned by ReadArchive for a location the store
	// did not produce.
	ErrBadLocation = errors.New("tape: unknown archive location")
	// ErrNoArchive is returned when a tape is archived on a store that
	// does not implement [Archiver].
	ErrNoArchive = errors.New("tape: store cannot archive")
)

// AppendOption configures one [Appender.Append] call.
type AppendOption func(*appendOptions) error

type appendOptions struct {
	commitID   string
	watermarks map[string]uint64
	reset      bool
	index      *Index
	noResult   bool
}

// WithCommitID makes the batch idempotent under id (for example a run id):
// appending a batch with an id the tape already committed stores nothing
// and returns the entries stored the first time. A store remembers the
// last [MaxCommits] commit ids of each tape; a reset forgets them.
func WithCommitID(id string) AppendOption {
	return func(o *appendOptions) error {
		if id == "" {
			return errors.New("tape: empty commit id")
		}
		o.commitID = id
		return nil
	}
}

// WithWatermark raises the watermark key of the tape to value (it never
// decreases) atomically with the batch. A batch may be empty to move only
// watermarks. See [Indexer.WaitWatermark].
func WithWatermark(key string, value uint64) AppendOption {
	return func(o *appendOptions) error {
		if key == "" {
			return errors.New("tape: empty watermark key")
		}
		if o.watermarks == nil {
			o.watermarks = map[string]uint64{}
		}
		o.watermarks[key] = max(o.watermarks[key], value)
		return nil
	}
}

// WithReset empties the tape before the batch, atomically: readers see the
// old tape or the new batch alone, and the batch's ids start at 1 (Bub's
// fork merge after a reset in the fork).
func WithReset() AppendOption {
	return func(o *appendOptions) error {
		o.reset = true
		return nil
	}
}

// WithoutResult says that the caller does not read the entries Append
// returns, as a run replaying its own events into a [Fork] does: a store
// that would return copies of the entries it keeps ([MemoryStore], Fork)
// returns nil instead of copying them.
func WithoutResult() AppendOption {
	return func(o *appendOptions) error {
		o.noResult = true
		return nil
	}
}

// WithIndex passes the caller's own recent read of the tape's index: a
// store that reads the index before writing may start from it instead. A
// stale index is safe (the write then notices and starts over from a
// fresh read), only slower. Stores without such a read ignore it.
func WithIndex(ix Index) AppendOption {
	return func(o *appendOptions) error {
		o.index = &ix
		return nil
	}
}

func resolveAppendOptions(opts []AppendOption) (appendOptions, error) {
	var o appendOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return appendOptions{}, err
		}
	}
	return o, nil
}

// Bounds of the lists an [Index] keeps.
const (
	// MaxCommits is how many recent commit ids an index remembers.
	MaxCommits = 32
	// MaxRecentAnchors is how many recent anchors an index remembers.
	MaxRecentAnchors = 32
)

// Index is the per-tape summary a store keeps beside the entries. Readers
// use it to read only what a query needs and to see a batch all at once;
// callers use it for cheap statistics and read-your-writes watermarks.
//
// Seq is a store position: the JetStream stream sequence of the last
// committed entry (MemoryStore counts positions the same way). It only
// grows, also across resets; FirstSeq is the position of entry 1 and is
// meaningful only while Entries > 0.
type Index struct {
	Tape     string `json:"tape"`
	Seq      uint64 `json:"seq"`
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastID   int64  `json:"last_id"`
	Entries  int64  `json:"entries"`
	Anchors  int64  `json:"anchors"`
	// RecentAnchors are the newest anchors, oldest first, at most
	// MaxRecentAnchors of them; the last one is the tape's last anchor.
	RecentAnchors []AnchorRef `json:"recent_anchors,omitempty"`
	// Commits are the newest commit ids, oldest first, at most MaxCommits.
	Commits []CommitRef `json:"commits,omitempty"`
	// Watermarks are caller-defined monotonic counters kept atomically with
	// the entries (e.g. "events stream sequence recorded up to").
	Watermarks map[string]uint64 `json:"watermarks,omitempty"`
	// Switches are the latest model and reasoning-effort switches among
	// the entries since the last reset, where Bub's load_state reads them.
	// nil when the index does not know them: it was written before the
	// store kept them, for a tape that had entries then (a reset or the
	// first entry starts them). A store outside this package keeps them
	// with [Switches.Apply] over the entries it appends (the conformance
	// suite, package tapetest, checks them); readers of an index without
	// them read the state bucket the recorder also keeps.
	Switches *Switches `json:"switches,omitempty"`
	// Revision changes with every update (the KV revision in JetStream).
	Revision uint64 `json:"-"`
}

// AnchorRef locates one anchor entry.
type AnchorRef struct {
	Name string `json:"name"`
	ID   int64  `json:"id"`
	Seq  uint64 `json:"seq"`
}

// CommitRef locates the entries of one committed batch.
type CommitRef struct {
	ID       string `json:"id"`
	FirstID  int64  `json:"first_id"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Count    int    `json:"count"`
}

// LastAnchor returns the tape's last anchor; ok is false when it has none.
func (ix Index) LastAnchor() (ref AnchorRef, ok bool) {
	if len(ix.RecentAnchors) == 0 {
		return AnchorRef{}, false
	}
	return ix.RecentAnchors[len(ix.RecentAnchors)-1], true
}

// EntriesSinceLastAnchor counts the entries after the last anchor, or all
// entries when there is none.
func (ix Index) EntriesSinceLastAnchor() int64 {
	if a, ok := ix.LastAnchor(); ok {
		return ix.LastID - a.ID
	}
	return ix.Entries
}

// Watermark returns the watermark key (0 when unset).
func (ix Index) Watermark(key string) uint64 { return ix.Watermarks[key] }

// findAnchor returns the newest remembered anchor named name. known is
// true when the answer is certain: the anchor was found, or the index
// remembers every anchor of the tape and none has that name.
func (ix Index) findAnchor(name string) (ref AnchorRef, found, known bool) {
	for i := len(ix.RecentAnchors) - 1; i >= 0; i-- {
		if ix.RecentAnchors[i].Name == name {
			return ix.RecentAnchors[i], true, true
		}
	}
	return AnchorRef{}, false, int64(len(ix.RecentAnchors)) >= ix.Anchors
}

// Commit returns the remembered commit with id, for example to skip work
// that must happen only once per commit (such as archiving before a reset
// that is committed with it).
func (ix Index) Commit(id string) (CommitRef, bool) {
	for _, c := range ix.Commits {
		if c.ID == id {
			return c, true
		}
	}
	return CommitRef{}, false
}

// Clone returns a copy of ix whose slices and map may be modified.
func (ix Index) Clone() Index {
	ix.RecentAnchors = slices.Clone(ix.RecentAnchors)
	ix.Commits = slices.Clone(ix.Commits)
	ix.Watermarks = maps.Clone(ix.Watermarks)
	if ix.Switches != nil {
		sw := *ix.Switches
		ix.Switches = &sw
	}
	return ix
}

// next returns the index after committing stored (entries at positions
// seqs) with o. Every store computes its index with it.
func (ix Index) next(stored []Entry, seqs []uint64, o appendOptions) Index {
	nx := ix.Clone()
	if o.reset {
		nx = Index{Tape: ix.Tape, Seq: ix.Seq, Watermarks: nx.Watermarks}
	}
	if nx.Entries == 0 {
		nx.Switches = &Switches{} // an empty tape has none, known
	}
	for i, e := range stored {
		if nx.Entries == 0 {
			nx.FirstSeq = seqs[i]
		}
		if nx.Switches != nil {
			nx.Switches.Apply(e)
		}
		nx.Seq, nx.LastID = seqs[i], e.ID
		nx.Entries++
		if e.Kind != KindAnchor {
			continue
		}
		nx.Anchors++
		// Only anchors with a string name delimit query slices.
		if name, ok := e.AnchorName(); ok {
			nx.RecentAnchors = append(nx.RecentAnchors, AnchorRef{Name: name, ID: e.ID, Seq: seqs[i]})
			if n := len(nx.RecentAnchors); n > MaxRecentAnchors {
				nx.RecentAnchors = slices.Clone(nx.RecentAnchors[n-MaxRecentAnchors:])
			}
		}
	}
	if o.commitID != "" {
		c := CommitRef{ID: o.commitID, Count: len(stored)}
		if len(stored) > 0 {
			c.FirstID, c.FirstSeq, c.LastSeq = stored[0].ID, seqs[0], seqs[len(seqs)-1]
		}
		nx.Commits = append(nx.Commits, c)
		if n := len(nx.Commits); n > MaxCommits {
			nx.Commits = slices.Clone(nx.Commits[n-MaxCommits:])
		}
	}
	for k, v := range o.watermarks {
		if nx.Watermarks == nil {
			nx.Watermarks = map[string]uint64{}
		}
		nx.Watermarks[k] = max(nx.Watermarks[k], v)
	}
	return nx
}

// KnownSwitches returns the tape's latest switches ([Index.Switches]), and
// false when the index does not know them.
func (ix Index) KnownSwitches() (Switches, bool) {
	switch {
	case ix.Switches != nil:
		return *ix.Switches, true
	case ix.Entries == 0:
		return Switches{}, true
	}
	return Switches{}, false
}

// reached reports whether watermark key is at least atLeast.
func (ix Index) reached(key string, atLeast uint64) bool { return ix.Watermarks[key] >= atLeast }

// waitError is the error WaitWatermark returns when ctx ends first.
func waitError(tape, key string, atLeast uint64, ix Index, err error) error {
	return fmt.Errorf("waiting for watermark %s >= %d of tape %q (at %d): %w", key, atLeast, tape, ix.Watermarks[key], err)
}

// numberEntries returns normalized copies of entries numbered from first.
func numberEntries(entries []Entry, first int64) ([]Entry, error) {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		n, err := normalize(e)
		if err != nil {
			return nil, err
		}
		n.ID = first + int64(i)
		out[i] = n
	}
	return out, nil
}

// AppendPlan is one [Appender.Append] call decided against the tape's
// committed index, by [PlanAppend].
type AppendPlan struct {
	// Replay is true when the batch's commit id was committed before: the
	// store writes nothing and returns the entries Commit locates (none
	// when its Count is 0).
	Replay bool
	Commit CommitRef
	// Reset is true when the store empties the tape before writing Stored,
	// in the same atomic step.
	Reset bool
	// Stored are the entries to write: normalized copies numbered from the
	// last id + 1 (from 1 after a reset).
	Stored []Entry
	// Index is the tape's index once Stored are committed. Its Revision is
	// the store's to set.
	Index Index
	// NoResult is true when the caller does not read the entries Append
	// returns ([WithoutResult]): the store may return nil.
	NoResult bool
}

// PlanAppend is the store-independent part of [Appender.Append] for a store
// kept outside this package: it resolves opts and decides the batch of
// entries against ix, the tape's committed index, with the entries at
// store positions firstSeq, firstSeq+1, … (see [Index]). The store then
// writes the plan atomically under its own lock. Every store that uses it
// numbers, deduplicates and indexes batches exactly like [MemoryStore].
func PlanAppend(ix Index, entries []Entry, firstSeq uint64, opts ...AppendOption) (AppendPlan, error) {
	o, err := resolveAppendOptions(opts)
	if err != nil {
		return AppendPlan{}, err
	}
	if o.commitID != "" {
		if c, ok := ix.Commit(o.commitID); ok {
			return AppendPlan{Replay: true, Commit: c, Index: ix.Clone(), NoResult: o.noResult}, nil
		}
	}
	first := ix.LastID + 1
	if o.reset {
		first = 1
	}
	stored, err := numberEntries(entries, first)
	if err != nil {
		return AppendPlan{}, err
	}
	return AppendPlan{Reset: o.reset, Stored: stored, Index: ix.next(stored, positions(firstSeq, len(stored)), o), NoResult: o.noResult}, nil
}

// Advance returns the index after entries, already numbered, were added at
// store positions firstSeq, firstSeq+1, … without a commit id or
// watermarks: for a store that finds entries it did not write itself (a
// tape file another program appended to).
func (ix Index) Advance(entries []Entry, firstSeq uint64) Index {
	return ix.next(entries, positions(firstSeq, len(entries)), appendOptions{})
}

// positions returns n consecutive store positions from first.
func positions(first uint64, n int) []uint64 {
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = first + uint64(i)
	}
	return seqs
}
