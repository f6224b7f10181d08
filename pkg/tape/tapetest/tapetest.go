package tapetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// Run runs the conformance suite. newStore must return a new, empty store
// on every call; the suite never shares a store between subtests.
func Run(t *testing.T, newStore func(t *testing.T) tape.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s tape.Store)
	}{
		{"IDsPerTape", testIDsPerTape},
		{"AppendReturnsStoredEntries", testAppendReturnsStored},
		{"ReadsAreCopies", testReadsAreCopies},
		{"CommitIDIsIdempotent", testCommitID},
		{"Queries", testQueries},
		{"QueriesOnEmptyTape", testEmptyTape},
		{"OldAnchorsBeyondIndex", testOldAnchors},
		{"LargeWindows", testLargeWindows},
		{"ListSorted", testList},
		{"Reset", testReset},
		{"ResetWithBatchIsAtomic", testAppendWithReset},
		{"Index", testIndex},
		{"IndexKeepsSwitches", testIndexSwitches},
		{"Watermarks", testWatermarks},
		{"WaitWatermark", testWaitWatermark},
		{"ConcurrentAppendsNeverInterleave", testConcurrentAppends},
		{"Archive", testArchive},
		{"TapeHandle", testTapeHandle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newStore(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func msg(text string) tape.Entry {
	return tape.MessageEntry(map[string]any{"role": "user", "content": text})
}

func mustAppend(t *testing.T, s tape.Store, name string, entries []tape.Entry, opts ...tape.AppendOption) []tape.Entry {
	t.Helper()
	stored, err := s.Append(ctxT(t), name, entries, opts...)
	if err != nil {
		t.Fatalf("Append(%q): %v", name, err)
	}
	return stored
}

func mustFetch(t *testing.T, s tape.Store, name string, q tape.Query) []tape.Entry {
	t.Helper()
	got, err := s.Fetch(ctxT(t), name, q)
	if err != nil {
		t.Fatalf("Fetch(%q): %v", name, err)
	}
	return got
}

func ids(entries []tape.Entry) []int64 {
	out := []int64{}
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

func wantIDs(t *testing.T, what string, entries []tape.Entry, want ...int64) {
	t.Helper()
	if want == nil {
		want = []int64{}
	}
	if got := ids(entries); !slices.Equal(got, want) {
		t.Fatalf("%s: ids %v, want %v", what, got, want)
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func wantBubError(t *testing.T, err error, kind bub.Kind, message string) {
	t.Helper()
	var be *bub.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v, want *bub.Error %s %q", err, kind, message)
	}
	if be.Kind != kind || be.Message != message {
		t.Fatalf("error [%s] %q, want [%s] %q", be.Kind, be.Message, kind, message)
	}
}

func testIDsPerTape(t *testing.T, s tape.Store) {
	wantIDs(t, "a first batch", mustAppend(t, s, "a", []tape.Entry{msg("1"), msg("2")}), 1, 2)
	wantIDs(t, "b", mustAppend(t, s, "b", []tape.Entry{msg("x")}), 1)
	wantIDs(t, "a second batch", mustAppend(t, s, "a", []tape.Entry{msg("3")}), 3)
	wantIDs(t, "a fetch", mustFetch(t, s, "a", tape.All()), 1, 2, 3)
	if err := s.Reset(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "a after reset", mustAppend(t, s, "a", []tape.Entry{msg("again")}), 1)
	wantIDs(t, "b untouched", mustFetch(t, s, "b", tape.All()), 1)
}

func testAppendReturnsStored(t *testing.T, s tape.Store) {
	dated := tape.Event("e", map[string]any{"n": 3, "list": []any{1, "two"}, "nested": map[string]any{"ok": true}})
	dated.Date = "2024-01-02T03:04:05+00:00"
	undated := tape.Entry{Kind: tape.KindSystem, Payload: map[string]any{"content": "sys"}}
	stored := mustAppend(t, s, "t", []tape.Entry{dated, undated})
	want := tape.Entry{
		ID: 1, Kind: tape.KindEvent, Date: "2024-01-02T03:04:05+00:00", Meta: map[string]any{},
		Payload: map[string]any{"name": "e", "data": map[string]any{
			"n": 3.0, "list": []any{1.0, "two"}, "nested": map[string]any{"ok": true},
		}},
	}
	if !reflect.DeepEqual(stored[0], want) {
		t.Fatalf("stored %#v\nwant %#v", stored[0], want)
	}
	if stored[1].Date == "" || !strings.HasSuffix(stored[1].Date, "+00:00") || stored[1].Meta == nil {
		t.Fatalf("undated entry stored as %#v: want a UTC date and empty meta", stored[1])
	}
	if got := mustFetch(t, s, "t", tape.All()); !reflect.DeepEqual(got, stored) {
		t.Fatalf("fetched %#v\nwant %#v", got, stored)
	}
}

func testReadsAreCopies(t *testing.T, s tape.Store) {
	mustAppend(t, s, "t", []tape.Entry{tape.Event("e", map[string]any{"k": "v"})})
	got := mustFetch(t, s, "t", tape.All())
	got[0].Payload["data"].(map[string]any)["k"] = "changed"
	got[0].Meta["x"] = 1
	again := mustFetch(t, s, "t", tape.All())
	if again[0].Payload["data"].(map[string]any)["k"] != "v" || len(again[0].Meta) != 0 {
		t.Fatalf("store changed by a caller: %#v", again[0])
	}
}

func testCommitID(t *testing.T, s tape.Store) {
	mustAppend(t, s, "t", []tape.Entry{msg("before")})
	first := mustAppend(t, s, "t", []tape.Entry{msg("a"), msg("b")}, tape.WithCommitID("run-1"))
	again := mustAppend(t, s, "t", []tape.Entry{msg("a"), msg("b"), msg("c")}, tape.WithCommitID("run-1"))
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("second append of run-1 returned %#v\nwant the first %#v", again, first)
	}
	mustAppend(t, s, "t", []tape.Entry{msg("d")}, tape.WithCommitID("run-2"))
	wantIDs(t, "tape", mustFetch(t, s, "t", tape.All()), 1, 2, 3, 4)
	ix, err := s.Index(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := ix.Commit("run-1"); !ok || c.FirstID != 2 || c.Count != 2 {
		t.Fatalf("Index.Commit(run-1) = %+v, %v; want first id 2, count 2", c, ok)
	}
	if _, ok := ix.Commit("run-9"); ok {
		t.Fatal("Index.Commit found a commit that never happened")
	}
	// Commit ids are per tape.
	wantIDs(t, "other tape", mustAppend(t, s, "u", []tape.Entry{msg("a")}, tape.WithCommitID("run-1")), 1)
	// An empty commit is remembered too.
	mustAppend(t, s, "t", nil, tape.WithCommitID("run-3"))
	if got := mustAppend(t, s, "t", []tape.Entry{msg("late")}, tape.WithCommitID("run-3")); len(got) != 0 {
		t.Fatalf("empty commit replayed as %v", ids(got))
	}
	wantIDs(t, "tape after empty commit", mustFetch(t, s, "t", tape.All()), 1, 2, 3, 4)
}

func dated(e tape.Entry, date string) tape.Entry {
	e.Date = date
	return e
}

func testQueries(t *testing.T, s tape.Store) {
	mustAppend(t, s, "t", []tape.Entry{
		dated(msg("hello"), "2024-01-01T10:00:00+00:00"),                             // 1
		dated(tape.Anchor("a", nil), "2024-01-01T12:00:00+00:00"),                    // 2
		dated(msg("Café au lait"), "2024-01-02T00:00:00+00:00"),                      // 3
		dated(tape.Anchor("b", map[string]any{"k": 1}), "2024-01-02T12:00:00Z"),      // 4
		dated(tape.Event("x", map[string]any{}), "2024-01-02T23:59:59.999999+00:00"), // 5
		dated(tape.Anchor("a", nil), "2024-01-03T00:00:00+00:00"),                    // 6
		dated(tape.ToolResults([]any{"r"}), "2024-01-03T01:00:00+00:00"),             // 7
		dated(msg("end"), "2024-01-03T23:59:59.500000+00:00"),                        // 8
	})
	notFound := func(name string) string { return fmt.Sprintf("Anchor '%s' was not found.", name) }
	tests := []struct {
		name    string
		q       tape.Query
		want    []int64
		errKind bub.Kind
		errMsg  string
	}{
		{name: "all", q: tape.All(), want: seq(1, 8)},
		{name: "after last a", q: tape.All().AfterAnchor("a"), want: []int64{7, 8}},
		{name: "after b", q: tape.All().AfterAnchor("b"), want: seq(5, 8)},
		{name: "after missing", q: tape.All().AfterAnchor("zzz"), errKind: bub.KindNotFound, errMsg: notFound("zzz")},
		{name: "after empty clears", q: tape.All().LastAnchor().AfterAnchor(""), want: seq(1, 8)},
		{name: "last anchor", q: tape.All().LastAnchor(), want: []int64{7, 8}},
		{name: "after replaces last", q: tape.All().LastAnchor().AfterAnchor("b"), want: seq(5, 8)},
		{name: "last replaces after", q: tape.All().AfterAnchor("b").LastAnchor(), want: []int64{7, 8}},
		{name: "between", q: tape.All().BetweenAnchors("b", "a"), want: []int64{5}},
		{name: "between wins over last", q: tape.All().LastAnchor().BetweenAnchors("b", "a"), want: []int64{5}},
		{name: "between adjacent", q: tape.All().BetweenAnchors("a", "b"), errKind: bub.KindNotFound, errMsg: notFound("b")},
		{name: "between missing start", q: tape.All().BetweenAnchors("zzz", "a"), errKind: bub.KindNotFound, errMsg: notFound("zzz")},
		{name: "text case-insensitive", q: tape.All().Text("HELLO"), want: []int64{1}},
		{name: "text non-ASCII", q: tape.All().Text("CAFÉ"), want: []int64{3}},
		{name: "text matches kind and meta rendering", q: tape.All().Text(`"kind": "anchor"`), want: []int64{2, 4, 6}},
		{name: "text after anchor", q: tape.All().AfterAnchor("b").Text("end"), want: []int64{8}},
		{name: "kinds", q: tape.All().Kinds(tape.KindAnchor), want: []int64{2, 4, 6}},
		{name: "several kinds", q: tape.All().Kinds(tape.KindEvent, tape.KindToolResult), want: []int64{5, 7}},
		{name: "kinds and limit", q: tape.All().Kinds(tape.KindMessage).Limit(2), want: []int64{1, 3}},
		{name: "limit", q: tape.All().Limit(3), want: []int64{1, 2, 3}},
		{name: "limit zero", q: tape.All().Limit(0), want: nil},
		{name: "negative limit removes it", q: tape.All().Limit(2).Limit(-1), want: seq(1, 8)},
		{name: "limit after anchor", q: tape.All().AfterAnchor("b").Limit(1), want: []int64{5}},
		{name: "one day", q: tape.All().BetweenDates("2024-01-02", "2024-01-02"), want: []int64{3, 4, 5}},
		{name: "end day is inclusive", q: tape.All().BetweenDates("2024-01-03", "2024-01-03"), want: []int64{6, 7, 8}},
		{name: "naive datetimes are UTC", q: tape.All().BetweenDates("2024-01-01T10:00:00", "2024-01-01 12:00"), want: []int64{1, 2}},
		{name: "offsets", q: tape.All().BetweenDates("2024-01-01T11:00:00+01:00", "2024-01-01T06:59:59-05:00"), want: []int64{1}},
		{name: "Z suffix and fraction", q: tape.All().BetweenDates("2024-01-03T23:59:59.5Z", "2024-01-04"), want: []int64{8}},
		{name: "dates after anchor", q: tape.All().AfterAnchor("b").BetweenDates("2024-01-02", "2024-01-02"), want: []int64{5}},
		{name: "bad start date", q: tape.All().BetweenDates("nope", "2024-01-01"), errKind: bub.KindInvalidInput, errMsg: "Invalid ISO date or datetime: 'nope'."},
		{name: "bad end date", q: tape.All().BetweenDates("2024-01-01", "2024-13-01"), errKind: bub.KindInvalidInput, errMsg: "Invalid ISO date or datetime: '2024-13-01'."},
		{name: "empty date", q: tape.All().BetweenDates("", "2024-01-01"), errKind: bub.KindInvalidInput, errMsg: "Invalid ISO date or datetime: ''."},
		{name: "start after end", q: tape.All().BetweenDates("2024-01-02", "2024-01-01"), errKind: bub.KindInvalidInput, errMsg: "Start date must be earlier than or equal to end date."},
		{name: "anchor error before date error", q: tape.All().AfterAnchor("zzz").BetweenDates("x", "y"), errKind: bub.KindNotFound, errMsg: notFound("zzz")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Fetch(ctxT(t), "t", tt.q)
			if tt.errMsg != "" {
				wantBubError(t, err, tt.errKind, tt.errMsg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantIDs(t, tt.name, got, tt.want...)
		})
	}
}

func testEmptyTape(t *testing.T, s tape.Store) {
	mustAppend(t, s, "no-anchors", []tape.Entry{msg("x")})
	for _, name := range []string{"missing", "no-anchors"} {
		_, err := s.Fetch(ctxT(t), name, tape.All().LastAnchor())
		wantBubError(t, err, bub.KindNotFound, "No anchors found in tape.")
		_, err = s.Fetch(ctxT(t), name, tape.All().AfterAnchor("a"))
		wantBubError(t, err, bub.KindNotFound, "Anchor 'a' was not found.")
	}
	wantIDs(t, "missing tape", mustFetch(t, s, "missing", tape.All()))
}

// testOldAnchors names an anchor that has dropped out of the index's
// recent-anchor memory, which makes an indexed store scan.
func testOldAnchors(t *testing.T, s tape.Store) {
	var batch []tape.Entry
	batch = append(batch, tape.Anchor("old", nil), msg("after old"))
	for i := range tape.MaxRecentAnchors + 3 {
		batch = append(batch, tape.Anchor(fmt.Sprintf("n%d", i), nil), msg(fmt.Sprint(i)))
	}
	mustAppend(t, s, "t", batch)
	last := int64(len(batch))
	wantIDs(t, "after old", mustFetch(t, s, "t", tape.All().AfterAnchor("old")), seq(2, last)...)
	wantIDs(t, "between old and n0", mustFetch(t, s, "t", tape.All().BetweenAnchors("old", "n0")), 2)
	_, err := s.Fetch(ctxT(t), "t", tape.All().AfterAnchor("never"))
	wantBubError(t, err, bub.KindNotFound, "Anchor 'never' was not found.")
	wantIDs(t, "last", mustFetch(t, s, "t", tape.All().LastAnchor()), last)
}

// testLargeWindows reads slices larger than a store's read batches.
func testLargeWindows(t *testing.T, s tape.Store) {
	const n = 2600
	batch := make([]tape.Entry, n)
	for i := range batch {
		batch[i] = msg(fmt.Sprint(i + 1))
	}
	batch[99] = tape.Anchor("big", nil) // id 100
	mustAppend(t, s, "t", batch[:1000])
	mustAppend(t, s, "t", batch[1000:])
	wantIDs(t, "after anchor", mustFetch(t, s, "t", tape.All().LastAnchor()), seq(101, n)...)
	wantIDs(t, "all", mustFetch(t, s, "t", tape.All()), seq(1, n)...)
	wantIDs(t, "limit", mustFetch(t, s, "t", tape.All().Limit(5)), seq(1, 5)...)
	wantIDs(t, "text", mustFetch(t, s, "t", tape.All().Text(`"content": "2600"`)), n)
}

func testList(t *testing.T, s tape.Store) {
	got, err := s.List(ctxT(t))
	if err != nil || len(got) != 0 {
		t.Fatalf("empty store lists %v, %v", got, err)
	}
	for _, name := range []string{"b", "telegram:1", "a", "c", "a b.c"} {
		mustAppend(t, s, name, []tape.Entry{msg(name)})
	}
	if err := s.Reset(ctxT(t), "c"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "watermark-only", nil, tape.WithWatermark("k", 1))
	got, err = s.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a b.c", "b", "telegram:1"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

func testReset(t *testing.T, s tape.Store) {
	mustAppend(t, s, "t", []tape.Entry{tape.Anchor("a", nil), msg("x")}, tape.WithCommitID("run-1"), tape.WithWatermark("events", 7))
	if err := s.Reset(ctxT(t), "t"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "after reset", mustFetch(t, s, "t", tape.All()))
	ix, err := s.Index(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	if ix.Entries != 0 || ix.LastID != 0 || ix.Anchors != 0 || len(ix.Commits) != 0 || ix.Watermark("events") != 7 {
		t.Fatalf("index after reset %+v: want no entries, anchors or commits and the watermark kept", ix)
	}
	// Reset forgets commit ids: the same run may be recorded again.
	wantIDs(t, "recommit", mustAppend(t, s, "t", []tape.Entry{msg("y")}, tape.WithCommitID("run-1")), 1)
	if err := s.Reset(ctxT(t), "never-written"); err != nil {
		t.Fatalf("resetting a missing tape: %v", err)
	}
}

func testAppendWithReset(t *testing.T, s tape.Store) {
	mustAppend(t, s, "t", []tape.Entry{msg("1"), tape.Anchor("a", nil), msg("3")})
	stored := mustAppend(t, s, "t", []tape.Entry{tape.Anchor("session/start", nil), msg("new")}, tape.WithReset())
	wantIDs(t, "stored", stored, 1, 2)
	got := mustFetch(t, s, "t", tape.All())
	if !reflect.DeepEqual(got, stored) {
		t.Fatalf("after reset+append the tape is %#v, want %#v", got, stored)
	}
	wantIDs(t, "last anchor", mustFetch(t, s, "t", tape.All().LastAnchor()), 2)
	wantIDs(t, "next", mustAppend(t, s, "t", []tape.Entry{msg("next")}), 3)
}

func testIndex(t *testing.T, s tape.Store) {
	ix, err := s.Index(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	if ix.Tape != "t" || ix.Entries != 0 {
		t.Fatalf("index of a missing tape: %+v", ix)
	}
	mustAppend(t, s, "t", []tape.Entry{msg("1"), tape.Anchor("a", nil), msg("3"), tape.Anchor("b", nil), msg("5"), msg("6")})
	ix, err = s.Index(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	last, ok := ix.LastAnchor()
	if ix.Entries != 6 || ix.LastID != 6 || ix.Anchors != 2 || !ok || last.Name != "b" || last.ID != 4 || ix.EntriesSinceLastAnchor() != 2 {
		t.Fatalf("index %+v", ix)
	}
	before := ix.Revision
	mustAppend(t, s, "t", []tape.Entry{msg("7")})
	if ix, _ = s.Index(ctxT(t), "t"); ix.Revision == before {
		t.Fatalf("revision did not change on append: %d", ix.Revision)
	}
}

// testIndexSwitches: the index keeps the latest model and reasoning-effort
// switch events among the entries since the last reset.
func testIndexSwitches(t *testing.T, s tape.Store) {
	switches := func(what string) tape.Switches {
		t.Helper()
		ix, err := s.Index(ctxT(t), "t")
		if err != nil {
			t.Fatal(err)
		}
		sw, ok := ix.KnownSwitches()
		if !ok {
			t.Fatalf("%s: the index does not know the switches: %+v", what, ix)
		}
		return sw
	}
	if sw := switches("a missing tape"); sw != (tape.Switches{}) {
		t.Fatalf("a missing tape has switches %+v", sw)
	}
	model := func(m string) tape.Entry {
		return tape.Event(tape.EventModelSwitch, map[string]any{"model": m}, nil)
	}
	effort := tape.Event(tape.EventReasoningEffortSwitch, map[string]any{"reasoning_effort": "high"}, nil)
	mustAppend(t, s, "t", []tape.Entry{msg("1"), model("openai:a")})
	mustAppend(t, s, "t", []tape.Entry{effort, model("openai:b"), msg("2")})
	if sw := switches("after two batches"); sw != (tape.Switches{Model: "openai:b", ReasoningEffort: "high"}) {
		t.Fatalf("switches %+v, want the latest of each", sw)
	}
	mustAppend(t, s, "t", []tape.Entry{model("openai:c")}, tape.WithReset())
	if sw := switches("after a reset"); sw != (tape.Switches{Model: "openai:c"}) {
		t.Fatalf("switches %+v, want only those after the reset", sw)
	}
}

func testWatermarks(t *testing.T, s tape.Store) {
	wm := func() uint64 {
		ix, err := s.Index(ctxT(t), "t")
		if err != nil {
			t.Fatal(err)
		}
		return ix.Watermark("events")
	}
	mustAppend(t, s, "t", []tape.Entry{msg("x")}, tape.WithWatermark("events", 10))
	if got := wm(); got != 10 {
		t.Fatalf("watermark %d, want 10", got)
	}
	mustAppend(t, s, "t", []tape.Entry{msg("y")}, tape.WithWatermark("events", 5))
	if got := wm(); got != 10 {
		t.Fatalf("watermark went down to %d", got)
	}
	mustAppend(t, s, "t", nil, tape.WithWatermark("events", 20), tape.WithWatermark("other", 1))
	if got := wm(); got != 20 {
		t.Fatalf("watermark %d after an empty batch, want 20", got)
	}
	wantIDs(t, "entries", mustFetch(t, s, "t", tape.All()), 1, 2)
	if _, err := s.Append(ctxT(t), "t", nil, tape.WithWatermark("", 1)); err == nil {
		t.Fatal("empty watermark key accepted")
	}
}

func testWaitWatermark(t *testing.T, s tape.Store) {
	mustAppend(t, s, "t", []tape.Entry{msg("x")}, tape.WithWatermark("events", 20))
	ix, err := s.WaitWatermark(ctxT(t), "t", "events", 15)
	if err != nil || ix.Watermark("events") != 20 {
		t.Fatalf("reached watermark: %+v, %v", ix, err)
	}

	type result struct {
		ix  tape.Index
		err error
	}
	done := make(chan result, 1)
	go func() {
		ix, err := s.WaitWatermark(ctxT(t), "t", "events", 30)
		done <- result{ix, err}
	}()
	mustAppend(t, s, "t", []tape.Entry{msg("y")}, tape.WithWatermark("events", 25))
	mustAppend(t, s, "t", []tape.Entry{msg("z")}, tape.WithWatermark("events", 30))
	select {
	case r := <-done:
		if r.err != nil || r.ix.Watermark("events") < 30 || r.ix.Entries < 3 {
			t.Fatalf("WaitWatermark returned %+v, %v", r.ix, r.err)
		}
	case <-ctxT(t).Done():
		t.Fatal("WaitWatermark did not return after the watermark was reached")
	}

	// A tape nobody wrote yet: the wait starts before the first append.
	go func() {
		ix, err := s.WaitWatermark(ctxT(t), "fresh", "events", 1)
		done <- result{ix, err}
	}()
	mustAppend(t, s, "fresh", nil, tape.WithWatermark("events", 1))
	if r := <-done; r.err != nil || r.ix.Watermark("events") != 1 {
		t.Fatalf("WaitWatermark on a fresh tape: %+v, %v", r.ix, r.err)
	}

	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	ix, err = s.WaitWatermark(short, "t", "events", 100)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitWatermark past its deadline returned %v, want DeadlineExceeded", err)
	}
	if ix.Watermark("events") != 30 {
		t.Fatalf("timed-out WaitWatermark returned index %+v, want the last one seen", ix)
	}
}

func testConcurrentAppends(t *testing.T, s tape.Store) {
	const writers, batches, size = 6, 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				batch := make([]tape.Entry, size)
				for i := range batch {
					batch[i] = tape.Event("e", map[string]any{"w": w, "b": b, "i": i})
				}
				stored, err := s.Append(ctxT(t), "t", batch)
				if err != nil {
					errs <- err
					return
				}
				for i := 1; i < len(stored); i++ {
					if stored[i].ID != stored[0].ID+int64(i) {
						errs <- fmt.Errorf("batch %d/%d stored with ids %v", w, b, ids(stored))
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustFetch(t, s, "t", tape.All())
	wantIDs(t, "tape", got, seq(1, writers*batches*size)...)
	for start := 0; start < len(got); start += size {
		first := got[start].Payload["data"].(map[string]any)
		for i, e := range got[start : start+size] {
			d := e.Payload["data"].(map[string]any)
			if d["w"] != first["w"] || d["b"] != first["b"] || d["i"] != float64(i) {
				t.Fatalf("entries %d-%d interleave batches: %v then %v", start+1, start+size, first, d)
			}
		}
	}
}

func testArchive(t *testing.T, s tape.Store) {
	a, ok := s.(tape.Archiver)
	if !ok {
		t.Skipf("%T does not implement tape.Archiver", s)
	}
	entries := mustAppend(t, s, "t", []tape.Entry{msg("one"), tape.Anchor("a", map[string]any{"ü": "ß"})})
	loc, err := a.Archive(ctxT(t), "t", entries)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := a.Archive(ctxT(t), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.ReadArchive(ctxT(t), loc)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("ReadArchive(%q) = %#v, %v\nwant %#v", loc, got, err, entries)
	}
	if got, err := a.ReadArchive(ctxT(t), empty); err != nil || len(got) != 0 {
		t.Fatalf("ReadArchive of an empty archive = %v, %v", got, err)
	}
	if _, err := a.ReadArchive(ctxT(t), "nowhere"); !errors.Is(err, tape.ErrBadLocation) {
		t.Fatalf("ReadArchive of a bad location: %v, want ErrBadLocation", err)
	}
}

func testTapeHandle(t *testing.T, s tape.Store) {
	ctx := ctxT(t)
	tp := tape.New(s, "session", tape.Context{})
	if _, err := tp.ReadMessages(ctx); err == nil {
		t.Fatal("reading the default context of a tape without anchors succeeded")
	}
	if err := tp.EnsureBootstrapAnchor(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tp.EnsureBootstrapAnchor(ctx); err != nil {
		t.Fatal(err)
	}
	reply := "hi there"
	if _, err := tp.Append(ctx, tape.ChatEntries(tape.ChatRecord{
		RunID: "run-1", SystemPrompt: "be brief",
		NewMessages:  []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hello")}},
		ResponseText: &reply,
		Usage:        &llm.Usage{PromptTokens: 8, TotalTokens: 10, PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 3}},
	})...); err != nil {
		t.Fatal(err)
	}
	msgs, err := tp.ReadMessages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Content.Text != "hello" || msgs[1].Role != llm.RoleAssistant || msgs[1].Content.Text != reply {
		t.Fatalf("context %+v", msgs)
	}
	info, err := tp.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "name: session\nentries: 6\nanchors: 1\nlast_anchor: session/start\nentries_since_last_anchor: 5\nlast_token_usage: 10\nlast_token_cache_hit_rate: 37.50%"
	if info.String() != want {
		t.Fatalf("info:\n%s\nwant:\n%s", info, want)
	}
	if _, ok := s.(tape.Archiver); !ok {
		return
	}
	out, err := tp.Reset(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	loc, ok := strings.CutPrefix(out, "Archived: ")
	if !ok {
		t.Fatalf("Reset(archive) = %q", out)
	}
	archived, err := s.(tape.Archiver).ReadArchive(ctx, loc)
	if err != nil || len(archived) != 6 {
		t.Fatalf("archive %q holds %d entries, %v; want 6", loc, len(archived), err)
	}
	after := mustFetch(t, s, "session", tape.All())
	if len(after) != 2 || after[0].Kind != tape.KindAnchor || after[0].Payload["state"].(map[string]any)["archived"] != loc {
		t.Fatalf("tape after reset: %#v", after)
	}
}
