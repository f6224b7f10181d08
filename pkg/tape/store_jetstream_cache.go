package tape

import (
	"container/list"
	"slices"
	"sync"
)

// This file is the JetStream adapter's cache of decoded committed entries.

// entryCacheBytes is the default bound of a [JetStreamStore]'s cache
// ([WithEntryCache]), counted in the bytes of the messages it decoded
// (their decoded form takes a few times more).
const entryCacheBytes = 8 << 20

// entryCache keeps, for the tapes a store read most recently, the
// committed entries it read last: one run of consecutive messages of the
// tape's subject, in stream order, as decoded. A committed message never
// changes and a stream sequence is never reused, so a later read that
// starts inside the run takes it from the cache and reads only the
// messages after it: a session's next turn decodes only what the turns
// since added. A reset writes the tape anew at higher sequences, so reads
// after it start past the run and miss.
type entryCache struct {
	mu    sync.Mutex
	limit int
	size  int
	lru   *list.List               // of *cachedRun, most recent first
	tapes map[string]*list.Element // by tape name
}

// cachedRun is one tape's run: seqs[i] is the stream sequence of
// entries[i], decoded from sizes[i] bytes; ids are consecutive.
type cachedRun struct {
	tape    string
	seqs    []uint64
	entries []Entry
	sizes   []int
	size    int
}

func newEntryCache(limit int) *entryCache {
	return &entryCache{limit: limit, lru: list.New(), tapes: map[string]*list.Element{}}
}

// get returns copies of at most count cached entries of tape from stream
// sequence start on, the first with id firstID, and the sequence of the
// last one (nil, 0 when the run does not hold start).
func (c *entryCache) get(tape string, start uint64, firstID int64, count int64) ([]Entry, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.tapes[tape]
	if el == nil {
		return nil, 0
	}
	r := el.Value.(*cachedRun)
	k, ok := slices.BinarySearch(r.seqs, start)
	if !ok || r.entries[k].ID != firstID {
		return nil, 0
	}
	c.lru.MoveToFront(el)
	end := k + int(min(count, int64(len(r.seqs)-k)))
	return cloneEntries(r.entries[k:end]), r.seqs[end-1]
}

// put records what a read of tape found: entries (ids consecutive) at
// seqs, decoded from sizes bytes each. after is the sequence of the
// cached entry the read went on from (0 for a read from the stream
// alone): when the tape's run still ends there, it gains the entries;
// otherwise they replace it. The oldest entries go first when the cache
// is over its limit. The entries are the cache's from now on: callers
// keep copies.
func (c *entryCache) put(tape string, after uint64, seqs []uint64, entries []Entry, sizes []int) {
	if len(entries) == 0 || c.limit == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &cachedRun{tape: tape}
	if el := c.tapes[tape]; el != nil {
		if old := el.Value.(*cachedRun); after > 0 && old.seqs[len(old.seqs)-1] == after {
			r = old
		}
		c.remove(el)
	}
	r.seqs, r.entries, r.sizes = append(r.seqs, seqs...), append(r.entries, entries...), append(r.sizes, sizes...)
	r.size = 0
	for _, n := range r.sizes {
		r.size += n
	}
	drop := 0
	for ; r.size > c.limit && drop < len(r.sizes)-1; drop++ {
		r.size -= r.sizes[drop]
	}
	if drop > 0 {
		r.seqs, r.entries, r.sizes = slices.Clone(r.seqs[drop:]), slices.Clone(r.entries[drop:]), slices.Clone(r.sizes[drop:])
	}
	c.tapes[tape] = c.lru.PushFront(r)
	c.size += r.size
	for c.size > c.limit && c.lru.Len() > 1 {
		c.remove(c.lru.Back())
	}
}

func (c *entryCache) remove(el *list.Element) {
	r := el.Value.(*cachedRun)
	c.lru.Remove(el)
	delete(c.tapes, r.tape)
	c.size -= r.size
}
