package tape

import (
	"cmp"
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

// cachedEntry is an entry of a run: its stream sequence, the entry as
// decoded and the bytes of its message.
type cachedEntry struct {
	seq   uint64
	entry Entry
	size  int
}

// cachedRun is one tape's run, ids consecutive, and its bytes.
type cachedRun struct {
	tape    string
	entries []cachedEntry
	size    int
}

func newEntryCache(limit int) *entryCache {
	return &entryCache{limit: limit, lru: list.New(), tapes: map[string]*list.Element{}}
}

// get returns at most count cached entries of tape from stream sequence
// start on, the first with id firstID, and the sequence of the last one
// (nil, 0 when the run does not hold start): copies, or when shared the
// cached entries themselves, which the caller must not change.
func (c *entryCache) get(tape string, start uint64, firstID int64, count int64, shared bool) ([]Entry, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.tapes[tape]
	if el == nil {
		return nil, 0
	}
	run := el.Value.(*cachedRun).entries
	k, ok := slices.BinarySearchFunc(run, start, func(e cachedEntry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !ok || run[k].entry.ID != firstID {
		return nil, 0
	}
	c.lru.MoveToFront(el)
	run = run[k : k+int(min(count, int64(len(run)-k)))]
	out := make([]Entry, len(run))
	for i, e := range run {
		out[i] = e.entry
		if !shared {
			out[i] = out[i].Clone()
		}
	}
	return out, run[len(run)-1].seq
}

// put records what a read of tape found: entries with consecutive ids.
// after is the sequence of the cached entry the read went on from (0 for
// a read from the stream alone): when the tape's run still ends there,
// it gains the entries; otherwise they replace it. The oldest entries go
// first when the cache is over its limit. put returns the entries for
// the caller: copies when the cache keeps them, unless shared (see get),
// else the entries themselves.
func (c *entryCache) put(tape string, after uint64, entries []cachedEntry, shared bool) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = e.entry
	}
	if len(entries) == 0 || c.limit == 0 {
		return out
	}
	if !shared {
		for i := range out {
			out[i] = out[i].Clone()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &cachedRun{tape: tape}
	if el := c.tapes[tape]; el != nil {
		if old := el.Value.(*cachedRun); after > 0 && old.entries[len(old.entries)-1].seq == after {
			r = old
		}
		c.remove(el)
	}
	r.entries = append(r.entries, entries...)
	for _, e := range entries {
		r.size += e.size
	}
	drop := 0
	for ; r.size > c.limit && drop < len(r.entries)-1; drop++ {
		r.size -= r.entries[drop].size
	}
	if drop > 0 {
		r.entries = slices.Clone(r.entries[drop:])
	}
	c.tapes[tape] = c.lru.PushFront(r)
	c.size += r.size
	for c.size > c.limit && c.lru.Len() > 1 {
		c.remove(c.lru.Back())
	}
	return out
}

func (c *entryCache) remove(el *list.Element) {
	r := el.Value.(*cachedRun)
	c.lru.Remove(el)
	delete(c.tapes, r.tape)
	c.size -= r.size
}
