package tape

import (
	"bytes"
	"encoding/json"
	"testing"
)

// sampleIndex is an index committing a batch of two entries (ids 4 and 5,
// an anchor among them) after three committed ones.
func sampleIndex() Index {
	return Index{Tape: "s", Seq: 0, FirstSeq: 3, LastID: 5, Entries: 5, Anchors: 2,
		RecentAnchors: []AnchorRef{{Name: "old", ID: 1, Seq: 3}, {Name: "new", ID: 5, Seq: 0}},
		Commits:       []CommitRef{{ID: "run-1", FirstID: 1, FirstSeq: 3, LastSeq: 7, Count: 3}, {ID: "run-2", FirstID: 4, Count: 2}},
		Watermarks:    map[string]uint64{"events": 42}}
}

// TestIndexMessageDerivesItsBatchPositions: the positions an index message
// names 0 are those of its batch's entries, stored just before it.
func TestIndexMessageDerivesItsBatchPositions(t *testing.T) {
	body := appendIndexMessage(nil, entryMessage{id: "s:index:k:9", source: "/bub/tape", session: "s"}, sampleIndex(), 2)
	validEvent(t, body)
	ix, err := decodeIndex("s", 20, body)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleIndex()
	want.Seq, want.Revision = 19, 20
	want.RecentAnchors[1].Seq = 19
	want.Commits[1].FirstSeq, want.Commits[1].LastSeq = 18, 19
	if got, exp := mustJSON(t, ix), mustJSON(t, want); !bytes.Equal(got, exp) || ix.Revision != 20 {
		t.Fatalf("decoded %s (revision %d)\nwant    %s", got, ix.Revision, exp)
	}
	for _, bad := range []string{
		`{"specversion":"1.0","type":"dev.bub.tape.entry.v1","data":{}}`,
		`{"specversion":"1.0","type":"dev.bub.tape.index.v1"}`,
		`{"specversion":"1.0","type":"dev.bub.tape.index.v1","data":{"entries":1,"batch":2}}`,
		`{"specversion":"1.0","type":"dev.bub.tape.index.v1","data":{"batch":-1}}`,
		`not JSON`,
	} {
		if _, err := decodeIndex("s", 1, []byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeIndex: arbitrary bytes at any stream sequence either fail to
// decode or give an index of the tape read for, at that revision, whose
// positions are all known: written again without a batch, it reads back
// the same.
func FuzzDecodeIndex(f *testing.F) {
	f.Add(appendIndexMessage(nil, entryMessage{id: "s:index:k:9", source: "/bub/tape", session: "s"}, sampleIndex(), 2), uint64(20))
	f.Add(appendIndexMessage(nil, entryMessage{id: "s:index:k:9", source: "/bub/tape", session: "s"}, sampleIndex(), 2), uint64(1))
	f.Add([]byte(`{"specversion":"1.0","type":"dev.bub.tape.index.v1","data":{"tape":"x","last_id":3,"entries":3,"batch":3,"recent_anchors":[{"name":"a","id":9,"seq":0}]}}`), uint64(2))
	f.Fuzz(func(t *testing.T, body []byte, seq uint64) {
		ix, err := decodeIndex("s", seq, body)
		if err != nil {
			return
		}
		if ix.Tape != "s" || ix.Revision != seq {
			t.Fatalf("tape %q revision %d, read as s at %d", ix.Tape, ix.Revision, seq)
		}
		again, err := decodeIndex("s", seq, appendIndexMessage(nil, entryMessage{id: "x", source: "/s", session: "s"}, ix, 0))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mustJSON(t, again), mustJSON(t, ix); !bytes.Equal(got, want) {
			t.Fatalf("written again %s, decoded %s", got, want)
		}
	})
}

// TestIndexMessageSwitches: an index message keeps the tape's switches; one
// written before the store kept them (no "switches") knows none of a tape
// with entries.
func TestIndexMessageSwitches(t *testing.T) {
	old := appendIndexMessage(nil, entryMessage{id: "s:index:k:9", source: "/bub/tape", session: "s"}, sampleIndex(), 2)
	ix, err := decodeIndex("s", 20, old)
	if err != nil {
		t.Fatal(err)
	}
	if sw, ok := ix.KnownSwitches(); ok {
		t.Fatalf("an index without switches knows %+v", sw)
	}
	with := sampleIndex()
	with.Switches = &Switches{Model: "openai:b"}
	body := appendIndexMessage(nil, entryMessage{id: "s:index:k:10", source: "/bub/tape", session: "s"}, with, 2)
	validEvent(t, body)
	if ix, err = decodeIndex("s", 21, body); err != nil {
		t.Fatal(err)
	}
	if sw, ok := ix.KnownSwitches(); !ok || sw.Model != "openai:b" {
		t.Fatalf("switches %+v (known %v), want model openai:b", sw, ok)
	}
}
