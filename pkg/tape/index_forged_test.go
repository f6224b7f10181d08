package tape

import "testing"

// TestFetchSurvivesAnIndexWithAnAbsurdLastID (failed before the fix):
// the stream holds
// whatever a client publishes on a tape's index subject, and decodeIndex
// (index_message.go) checks only the event type and that 0 <= batch <=
// entries: it accepts an index whose last_id is far beyond what its
// committed range [first_seq, seq] can hold. window (store_jetstream.go)
// then asks readCommitted for last_id - 1 + 1 entries, and readCommitted
// preallocates that many before reading a single message:
//
//	read := make([]cachedEntry, 0, count-int64(len(cached)))
//
// With last_id = 2^62 the runtime panics ("makeslice: cap out of range")
// inside Fetch, taking the reading worker down; with a value like 10^9 it
// tries to allocate tens of gigabytes instead. The same preallocation
// runs on Append's commit replay (attempt, store_jetstream_write.go) with
// a remembered commit's count, so the recorder crashes the same way.
//
// Interleaving: a tape with one committed entry; another client publishes
// a well-formed index event for it (expecting the current index revision,
// as a writer would) whose last_id is 2^62; a reader fetches the tape.
//
// Expected: Fetch returns an error (the index names entries the stream
// does not hold), it does not panic.
func TestFetchSurvivesAnIndexWithAnAbsurdLastID(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("a")}); err != nil {
		t.Fatal(err)
	}
	ix, err := s.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	bad := ix.Clone()
	bad.LastID = 1 << 62
	_, js := f.srv.JetStream(t)
	if _, err := js.PublishMsg(ctx, indexMessage(f.names, "/other/client", bad, 0, ix.Revision, "other:index")); err != nil {
		t.Fatal(err)
	}
	reader := f.store(t)
	var got []Entry
	panicked := func() (p any) {
		defer func() { p = recover() }()
		got, err = reader.Fetch(ctx, "t", All())
		return nil
	}()
	if panicked != nil {
		t.Fatalf("Fetch panicked on an index message with last_id 2^62: %v", panicked)
	}
	if err == nil {
		t.Fatalf("Fetch returned %d entries and no error for an index naming 2^62 entries", len(got))
	}
}

// TestAppendSurvivesAnIndexWithAnAbsurdCommitCount (failed before the
// fix): the same
// unchecked preallocation in readCommitted (store_jetstream.go, the
// make([]cachedEntry, 0, count-…) line) reached from the writer. attempt
// (store_jetstream_write.go) replays a commit id the index remembers by
// reading c.Count entries from c.FirstSeq, and decodeIndex never checks a
// CommitRef's count. An index event published by another client whose
// commit "run-1" claims 2^62 entries makes the recorder's retry of run-1
// panic inside Append instead of failing.
//
// Expected: Append returns an error, it does not panic.
func TestAppendSurvivesAnIndexWithAnAbsurdCommitCount(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("a")}, WithCommitID("run-1")); err != nil {
		t.Fatal(err)
	}
	ix, err := s.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	bad := ix.Clone()
	bad.Commits[len(bad.Commits)-1].Count = 1 << 62
	_, js := f.srv.JetStream(t)
	if _, err := js.PublishMsg(ctx, indexMessage(f.names, "/other/client", bad, 0, ix.Revision, "other:index")); err != nil {
		t.Fatal(err)
	}
	writer := f.store(t)
	panicked := func() (p any) {
		defer func() { p = recover() }()
		_, err = writer.Append(ctx, "t", []Entry{userMsg("a")}, WithCommitID("run-1"))
		return nil
	}()
	if panicked != nil {
		t.Fatalf("Append panicked replaying a commit whose count is 2^62: %v", panicked)
	}
	if err == nil {
		t.Fatal("Append replayed a commit of 2^62 entries without an error")
	}
}
