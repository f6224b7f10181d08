package tape

import (
	"reflect"
	"testing"
)

// TestJetStreamReadsOnlyWhatWasCommittedSinceItsLastRead: a session's
// next turn reads its context again; the store takes the entries it read
// last from its cache and reads from the stream only those committed
// since, and what it returns is what a fresh store reads.
func TestJetStreamReadsOnlyWhatWasCommittedSinceItsLastRead(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	ctx := t.Context()
	appendNumbered(t, s, "t", 30, 0)
	first, err := s.Fetch(ctx, "t", All().LastAnchor())
	if err != nil || len(first) != 29 {
		t.Fatalf("%d entries, %v", len(first), err)
	}
	// A caller may change what it got: the cache keeps its own copies.
	first[0].Payload["content"] = "changed by the caller"

	api := countAPI(t, f)
	again, err := s.Fetch(ctx, "t", All().LastAnchor())
	if err != nil {
		t.Fatal(err)
	}
	if got := api.take(t); got["DIRECT.GET"] != 1 || len(got) != 1 {
		t.Fatalf("API requests %v, want only the index's direct get", got)
	}
	if again[0].Payload["content"] != "1" {
		t.Fatalf("first entry %v, want the committed one", again[0].Payload)
	}

	appendNumbered(t, s, "t", 5, 3) // the next turn's entries, the 4th an anchor
	api = countAPI(t, f)
	all, err := s.Fetch(ctx, "t", All())
	if err != nil {
		t.Fatal(err)
	}
	// The index, and one direct get of entries 31–35: 1–30 (the anchor
	// the first read started at on) come from the cache.
	if got := api.take(t); got["DIRECT.GET"] != 2 || len(got) != 1 || len(all) != 35 {
		t.Fatalf("%d entries; API requests %v, want the index and one direct get", len(all), got)
	}
	fresh, err := f.store(t).Fetch(ctx, "t", All())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, fresh) {
		t.Fatalf("cached read differs from a fresh store's:\n%v\n%v", all, fresh)
	}

	// The run holds all 35: reading from the new anchor (entry 34) on
	// takes everything from the cache.
	api = countAPI(t, f)
	tail, err := s.Fetch(ctx, "t", All().LastAnchor())
	if err != nil || len(tail) != 1 || tail[0].ID != 35 {
		t.Fatalf("after the last anchor: %v, %v", tail, err)
	}
	if got := api.take(t); got["DIRECT.GET"] != 1 || len(got) != 1 {
		t.Fatalf("API requests %v, want only the index's direct get", got)
	}

	// A reset writes the tape anew: reads after it miss the old run.
	if err := s.Reset(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	appendNumbered(t, s, "t", 3, 0)
	got, err := s.Fetch(ctx, "t", All())
	if err != nil || len(got) != 3 || got[0].ID != 1 {
		t.Fatalf("after the reset: %v, %v", got, err)
	}
}

// TestEntryCacheStaysWithinItsLimit: the cache drops the oldest entries
// of a run, then the least recently read tapes, to stay within its bytes.
func TestEntryCacheStaysWithinItsLimit(t *testing.T) {
	c := newEntryCache(100)
	run := func(n int, seq0 uint64, id0 int64) []cachedEntry {
		entries := make([]cachedEntry, n)
		for i := range n {
			entries[i] = cachedEntry{seq: seq0 + uint64(i), entry: userMsg("x"), size: 10}
			entries[i].entry.ID = id0 + int64(i)
		}
		return entries
	}
	c.put("a", 0, run(15, 1, 1), false)
	if got, _ := c.get("a", 1, 1, 15, false); got != nil {
		t.Fatalf("the oldest entries stayed: %d", len(got))
	}
	if got, last := c.get("a", 6, 6, 15, false); len(got) != 10 || last != 15 {
		t.Fatalf("got %d entries up to %d, want the newest 10 up to 15", len(got), last)
	}
	c.put("a", 15, run(5, 16, 16), false) // continues the run, which drops 5 more
	if got, last := c.get("a", 11, 11, 100, false); len(got) != 10 || last != 20 || c.size != 100 {
		t.Fatalf("got %d up to %d (size %d), want 10 up to 20 (100)", len(got), last, c.size)
	}
	c.put("b", 0, run(3, 100, 1), false) // over the limit: a, read least recently, goes
	if got, _ := c.get("a", 11, 11, 100, false); got != nil || c.size != 30 {
		t.Fatalf("tape a stayed (size %d)", c.size)
	}
	if got, _ := c.get("b", 100, 2, 3, false); got != nil {
		t.Fatal("a read whose first id differs hit the cache")
	}
}
