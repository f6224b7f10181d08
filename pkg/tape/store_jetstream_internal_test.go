package tape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

var internalPrefixes atomic.Int64

// jsFixture is one embedded server, or a server of a cluster whose
// stores keep the tapes at replicas, with a fresh deployment prefix.
type jsFixture struct {
	srv      *natstest.Server
	names    subjects.Names
	replicas int
}

func newFixture(t *testing.T) jsFixture { return onServer(t, natstest.Start(t), 1) }

// on is f on another server of its cluster: the same subjects and
// replicas, its stores connected to srv.
func (f jsFixture) on(srv *natstest.Server) jsFixture {
	return jsFixture{srv: srv, names: f.names, replicas: f.replicas}
}

// newClusterFixture is a fixture on a server of cluster c: its stores
// provision an R3 tapes stream, so they append atomic batches.
func newClusterFixture(t *testing.T, c *natstest.Cluster) jsFixture {
	return onServer(t, c.Servers[0], 3)
}

// layouts are the layouts a test of replicas that lag runs on: one
// server, and a cluster (see fixtureOn).
var layouts = []string{"one server", "cluster"}

// fixtureOn returns a fixture on one server, or on c for "cluster".
func fixtureOn(t *testing.T, on string, c *natstest.Cluster) jsFixture {
	if on == "cluster" {
		return newClusterFixture(t, c)
	}
	return newFixture(t)
}

func onServer(t *testing.T, srv *natstest.Server, replicas int) jsFixture {
	t.Helper()
	names, err := subjects.New(fmt.Sprintf("i%d", internalPrefixes.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return jsFixture{srv: srv, names: names, replicas: replicas}
}

// store returns a store on a new connection, as another process would
// have.
func (f jsFixture) store(t *testing.T, opts ...JetStreamOption) *JetStreamStore {
	t.Helper()
	_, js := f.srv.JetStream(t)
	s, err := NewJetStreamStore(t.Context(), js, f.names, append([]JetStreamOption{WithReplicas(f.replicas)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// subjectMessages counts the messages stored on tape's subject, committed
// or not.
func subjectMessages(t *testing.T, s *JetStreamStore, tape string) uint64 {
	t.Helper()
	info, err := s.stream.Info(t.Context(), jetstream.WithSubjectFilter(s.names.Tape(tape)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[s.names.Tape(tape)]
}

func userMsg(text string) Entry {
	return MessageEntry(map[string]any{"role": "user", "content": text})
}

// userMsgs is batch b of writer name: size user messages
// "<name>-b<b>-<i>".
func userMsgs(name string, b, size int) []Entry {
	batch := make([]Entry, size)
	for i := range batch {
		batch[i] = userMsg(fmt.Sprintf("%s-b%d-%d", name, b, i))
	}
	return batch
}

// writerOf is one concurrent writer of appendAtOnce: a store, the tape it
// appends to and a name for its entries.
type writerOf struct {
	s          *JetStreamStore
	tape, name string
}

// appendAtOnce runs every writer at once, each appending batch(w, b) for
// b from 0 to batches-1 in order, and fails t on the first error.
func appendAtOnce(t *testing.T, writers []writerOf, batches int, batch func(w writerOf, b int) []Entry) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(writers))
	for _, w := range writers {
		wg.Go(func() {
			for b := range batches {
				if _, err := w.s.Append(t.Context(), w.tape, batch(w, b)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func contents(t *testing.T, entries []Entry) []string {
	t.Helper()
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%d:%v", e.ID, e.Payload["content"]))
	}
	return out
}

func wantContents(t *testing.T, s Store, tape string, want ...string) {
	t.Helper()
	got, err := s.Fetch(t.Context(), tape, All())
	if err != nil {
		t.Fatal(err)
	}
	if c := contents(t, got); !slices.Equal(c, want) {
		t.Fatalf("tape %q holds %q, want %q", tape, c, want)
	}
}

// crash publishes batch[:n] of a commit the way Append does and stops
// before committing, like a writer that died.
func crash(t *testing.T, s *JetStreamStore, tape string, batch []Entry, n int, opts ...AppendOption) []uint64 {
	t.Helper()
	o, err := resolveAppendOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := s.Index(t.Context(), tape)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := numberEntries(batch, ix.LastID+1)
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.lastSeq(t.Context(), s.names.Tape(tape))
	if err != nil {
		t.Fatal(err)
	}
	w := s.newWriter(tape, batch, o)
	w.rev = ix.Revision
	seqs, err := w.publish(t.Context(), stored[:n], last)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

func TestJetStreamAdoptsOrphansOfTheSameCommit(t *testing.T) {
	s := newFixture(t).store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
		t.Fatal(err)
	}
	batch := []Entry{userMsg("a"), userMsg("b"), userMsg("c")}
	for i := range batch {
		batch[i].Date = "2024-01-01T00:00:0" + fmt.Sprint(i) + "+00:00"
	}
	crash(t, s, "t", batch, 2, WithCommitID("run-1"))
	wantContents(t, s, "t", "1:first") // uncommitted entries stay invisible

	retry := slices.Clone(batch)
	for i := range retry {
		retry[i].Date = "2025-01-01T00:00:00+00:00"
	}
	stored, err := s.Append(ctx, "t", retry, WithCommitID("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	dates := []string{stored[0].Date, stored[1].Date, stored[2].Date}
	if want := []string{batch[0].Date, batch[1].Date, retry[2].Date}; !slices.Equal(dates, want) {
		t.Fatalf("dates %q, want the two adopted entries then the new one %q", dates, want)
	}
	wantContents(t, s, "t", "1:first", "2:a", "3:b", "4:c")

	// A crash after the whole batch but before the commit.
	crash(t, s, "t", []Entry{userMsg("d")}, 1, WithCommitID("run-2"))
	if _, err := s.Append(ctx, "t", []Entry{userMsg("d")}, WithCommitID("run-2")); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t", "1:first", "2:a", "3:b", "4:c", "5:d")
}

func TestJetStreamDeletesOrphansOfOtherWriters(t *testing.T) {
	f := newFixture(t)
	s := f.store(t, WithOrphanGrace(0))
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
		t.Fatal(err)
	}
	crash(t, s, "t", []Entry{userMsg("x"), userMsg("y"), userMsg("z")}, 2, WithCommitID("run-x"))
	_, js := f.srv.JetStream(t)
	if _, err := js.Publish(ctx, f.names.Tape("t"), []byte("not an entry")); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t", "1:first")
	if got, err := s.Fetch(ctx, "t", All().Limit(5)); err != nil || len(got) != 1 {
		t.Fatalf("limited read past the committed range: %v, %v", contents(t, got), err)
	}

	stored, err := s.Append(ctx, "t", []Entry{userMsg("b"), userMsg("c")})
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(t, stored); !slices.Equal(got, []string{"2:b", "3:c"}) {
		t.Fatalf("stored %q", got)
	}
	wantContents(t, s, "t", "1:first", "2:b", "3:c")
	// run-x never committed, so it is recorded now, in full.
	if _, err := s.Append(ctx, "t", []Entry{userMsg("x"), userMsg("y"), userMsg("z")}, WithCommitID("run-x")); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t", "1:first", "2:b", "3:c", "4:x", "5:y", "6:z")
}

func TestJetStreamWaitsForALiveWriter(t *testing.T) {
	f := newFixture(t)
	a, b := f.store(t), f.store(t, WithOrphanGrace(time.Minute))
	ctx := t.Context()
	if _, err := a.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
		t.Fatal(err)
	}
	run := []Entry{userMsg("a1"), userMsg("a2"), userMsg("a3")}
	crash(t, a, "t", run, 2, WithCommitID("run-a")) // a is "still publishing"

	done := make(chan error, 1)
	go func() {
		_, err := b.Append(ctx, "t", []Entry{userMsg("b")})
		done <- err
	}()
	if _, err := a.Append(ctx, "t", run, WithCommitID("run-a")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantContents(t, a, "t", "1:first", "2:a1", "3:a2", "4:a3", "5:b")
}

// TestJetStreamDropsWhatADeadWriterLeft: a writer that died half-way
// through its batch (no commit) leaves nothing a reader sees, and the
// next append neither waits for it nor meets its entries.
func TestJetStreamDropsWhatADeadWriterLeft(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
		t.Fatal(err)
	}
	dead, err := jetstreamext.NewBatchPublisher(s.js)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"lost-a", "lost-b"} {
		e, err := numberEntries([]Entry{userMsg(text)}, int64(2+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := dead.AddMsg(&nats.Msg{Subject: f.names.Tape("t"), Data: appendEntry(nil, e[0])}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := f.store(t).Append(ctx, "t", []Entry{userMsg("second")}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the append took %v", d)
	}
	wantContents(t, s, "t", "1:first", "2:second")
	if n := subjectMessages(t, s, "t"); n != 2 {
		t.Fatalf("%d messages on the tape subject, want the 2 committed", n)
	}
}

// TestJetStreamCommitWhoseAnswerWasLost: a commit sent again with the same
// ids after its acknowledgement was lost is recognised as stored, as a
// checked chain on one server and as an atomic batch on a 3-node cluster,
// and stores nothing twice; with or without a commit id.
func TestJetStreamCommitWhoseAnswerWasLost(t *testing.T) {
	for _, c := range []struct {
		name    string
		fixture jsFixture
	}{
		{"one server", newFixture(t)},
		{"cluster", newClusterFixture(t, natstest.StartCluster(t, 3))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.fixture.store(t)
			if s.atomic != (c.name == "cluster") {
				t.Fatalf("atomic batches %v on %s", s.atomic, c.name)
			}
			ctx := t.Context()
			for i, o := range []appendOptions{{commitID: "run-1"}, {}} {
				tape := fmt.Sprintf("t%d", i)
				ix, err := s.Index(ctx, tape)
				if err != nil {
					t.Fatal(err)
				}
				w := s.newWriter(tape, []Entry{userMsg("a"), userMsg("b")}, o)
				w.rev = ix.Revision
				stored, err := numberEntries(w.entries, 1)
				if err != nil {
					t.Fatal(err)
				}
				nx, err := w.write(ctx, ix, stored)
				if err != nil || nx.Revision == 0 || nx.Seq != nx.Revision-1 && s.atomic {
					t.Fatalf("first commit: %+v, %v", nx, err)
				}
				// A batch is answered as a duplicate (no revision); a
				// chain adopts its own entries, and its index, which
				// one server checks before the duplicate window, is
				// found as the subject's last message, with its id.
				again, err := w.write(ctx, ix, stored)
				if s.atomic && (err != nil || again.Revision != 0) || !s.atomic && (err != nil || again.Revision != nx.Revision) {
					t.Fatalf("the same commit again: %+v, %v (first %d)", again, err, nx.Revision)
				}
				wantContents(t, s, tape, "1:a", "2:b")
			}
		})
	}
}

// lossyJS loses the acknowledgement of the next message it sends on
// subject: the message is stored, its answer never arrives, as with a
// slow or reconnecting server.
type lossyJS struct {
	jetstream.JetStream
	subject string
	lose    atomic.Bool
	// onLoss, when set, runs once the lost message is stored, before its
	// sender waits for the answer that never comes.
	onLoss func()
}

// lostAck is a publish whose answer never comes.
type lostAck struct{ m *nats.Msg }

func (lostAck) Ok() <-chan *jetstream.PubAck { return nil }
func (lostAck) Err() <-chan error            { return nil }
func (a lostAck) Msg() *nats.Msg             { return a.m }

func (j *lossyJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := j.JetStream.PublishMsgAsync(m, opts...)
	if err == nil && m.Subject == j.subject && j.lose.CompareAndSwap(true, false) {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return nil, err
		}
		if j.onLoss != nil {
			j.onLoss()
		}
		return lostAck{m}, nil
	}
	return f, err
}

// TestJetStreamAppendWhoseIndexAnswerWasLost: on one server an append
// without a commit id whose index was stored but not acknowledged is
// recognised as committed when its retry fails the compare-and-set, not
// stored a second time.
func TestJetStreamAppendWhoseIndexAnswerWasLost(t *testing.T) {
	f := newFixture(t)
	_, js := f.srv.JetStream(t)
	lossy := &lossyJS{JetStream: js, subject: f.names.TapeIndex("t")}
	s, err := NewJetStreamStore(t.Context(), lossy, f.names)
	if err != nil {
		t.Fatal(err)
	}
	lossy.lose.Store(true)
	stored, err := s.Append(t.Context(), "t", []Entry{userMsg("a"), userMsg("b")})
	if err != nil || !slices.Equal(contents(t, stored), []string{"1:a", "2:b"}) {
		t.Fatalf("append: %v, %v", contents(t, stored), err)
	}
	if lossy.lose.Load() {
		t.Fatal("no index answer was lost")
	}
	wantContents(t, s, "t", "1:a", "2:b")
}

// TestJetStreamBatchWhoseAnswerWasLostUnderAnotherCommit: on a 3-server
// cluster an append's atomic batch is stored but its acknowledgement is
// lost, and another writer (another store, on its own connection) commits
// on top of it before the batch goes out again with the same ids. The
// stream answers that as a duplicate with the tape's subject no longer
// ending where the batch expected: the append must find its batch
// committed and return its entries as stored, never store them a second
// time under new ids; with or without a commit id, and also when the
// replica that answers the writer's reads of the tape has not stored the
// batch yet (laggingTape), which answers that it is not there.
func TestJetStreamBatchWhoseAnswerWasLostUnderAnotherCommit(t *testing.T) {
	f := newClusterFixture(t, natstest.StartCluster(t, 3))
	s, other := f.store(t), f.store(t)
	if !s.atomic {
		t.Fatal("no atomic batches on the cluster")
	}
	ctx := t.Context()
	for _, lag := range []bool{false, true} {
		for i, o := range []appendOptions{{commitID: "run-1"}, {}} {
			tape := fmt.Sprintf("t%d-%v", i, lag)
			if _, err := s.Append(ctx, tape, []Entry{userMsg("first")}); err != nil {
				t.Fatal(err)
			}
			ix, err := s.Index(ctx, tape)
			if err != nil {
				t.Fatal(err)
			}
			lagging := lagNow(t, s, tape) // as it was before the batch
			w := s.newWriter(tape, []Entry{userMsg("a"), userMsg("b")}, o)
			w.rev = ix.Revision
			stored, err := numberEntries(w.entries, ix.LastID+1)
			if err != nil {
				t.Fatal(err)
			}
			if nx, err := w.write(ctx, ix, stored); err != nil || nx.Revision == 0 {
				t.Fatalf("first commit: %+v, %v", nx, err)
			}
			// Its answer is lost; meanwhile another writer commits.
			if _, err := other.Append(ctx, tape, []Entry{userMsg("c")}); err != nil {
				t.Fatal(err)
			}
			if lag {
				s.stream = lagging
			}
			// The batch again (sendBatch's retry), then the attempts
			// Append makes after one that asks to start over.
			_, err = w.write(ctx, ix, stored)
			got := stored
			for n := 0; (errors.Is(err, errRetry) || errors.Is(err, errWait)) && n < maxAppendAttempts; n++ {
				got, err = w.attempt(ctx)
			}
			s.stream = lagging.Stream
			if err != nil || !slices.Equal(contents(t, got), []string{"2:a", "3:b"}) {
				t.Fatalf("lagging %v, commit id %v: the append returned %q, %v; want its committed entries 2:a, 3:b", lag, o.commitID != "", contents(t, got), err)
			}
			wantContents(t, s, tape, "1:first", "2:a", "3:b", "4:c")
		}
	}
}

// failingLeader passes the message gets of s on to the stream leader
// through a responder of its own, but answers the first one that fail
// picks with an error that is not transient, as a leader that cannot read
// its store would. It returns whether it has.
func failingLeader(t *testing.T, f jsFixture, s *JetStreamStore, fail func(msgGetRequest) bool) func() bool {
	t.Helper()
	nc, _ := f.srv.JetStream(t)
	real := s.msgGetSubject
	s.msgGetSubject = nats.NewInbox()
	var failed atomic.Bool
	sub, err := nc.Subscribe(s.msgGetSubject, func(m *nats.Msg) {
		var req msgGetRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		if fail(req) && failed.CompareAndSwap(false, true) {
			_ = m.Respond([]byte(`{"error":{"code":500,"err_code":10999,"description":"injected"}}`))
			return
		}
		a, err := nc.Request(real, m.Data, jsretry.ReadAttempt)
		if err != nil {
			t.Error(err)
			return
		}
		_ = m.Respond(a.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return failed.Load
}

// TestJetStreamBatchWhoseAnswerWasLostAndCannotBeChecked: as in
// TestJetStreamBatchWhoseAnswerWasLostUnderAnotherCommit, without a
// commit id, but a read that looks for the batch fails (the read of its
// first entry, of its last one, or of the entry after it): the append
// must fail with that error, not take the batch for not stored and store
// it a second time.
func TestJetStreamBatchWhoseAnswerWasLostAndCannotBeChecked(t *testing.T) {
	f := newClusterFixture(t, natstest.StartCluster(t, 3))
	other := f.store(t)
	ctx := t.Context()
	for i, failing := range []string{"first", "last", "next"} {
		s := f.store(t)
		tape := fmt.Sprintf("t%d", i)
		if _, err := s.Append(ctx, tape, []Entry{userMsg("first")}); err != nil {
			t.Fatal(err)
		}
		ix, err := s.Index(ctx, tape)
		if err != nil {
			t.Fatal(err)
		}
		w := s.newWriter(tape, []Entry{userMsg("a"), userMsg("b")}, appendOptions{})
		w.rev = ix.Revision
		stored, err := numberEntries(w.entries, ix.LastID+1)
		if err != nil {
			t.Fatal(err)
		}
		nx, err := w.write(ctx, ix, stored)
		if err != nil || nx.Revision == 0 {
			t.Fatalf("first commit: %+v, %v", nx, err)
		}
		if _, err := other.Append(ctx, tape, []Entry{userMsg("c")}); err != nil {
			t.Fatal(err)
		}
		seq := map[string]uint64{"first": ix.Seq + 1, "last": nx.Seq, "next": nx.Seq + 1}[failing]
		failed := failingLeader(t, f, s, func(req msgGetRequest) bool {
			return req.Seq == seq && req.NextFor == s.names.Tape(tape)
		})
		_, err = w.write(ctx, ix, stored)
		got := stored
		for n := 0; (errors.Is(err, errRetry) || errors.Is(err, errWait)) && n < maxAppendAttempts; n++ {
			got, err = w.attempt(ctx)
		}
		if !failed() {
			t.Fatalf("failing the read of the %s entry: it was never read", failing)
		}
		if err == nil || errors.Is(err, errRetry) || errors.Is(err, errWait) || errors.Is(err, errTail) || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("failing the read of the %s entry: the append returned %q, %v; want the read's error", failing, contents(t, got), err)
		}
		wantContents(t, s, tape, "1:first", "2:a", "3:b", "4:c")
	}
}

// TestJetStreamIndexWhoseAnswerWasLostUnderAnotherCommit: on one server
// an append's index is stored but not acknowledged, and another writer
// commits on top of it before the index goes out again, which then fails
// the compare-and-set against the other writer's index. The append must
// find its entries committed, not store them a second time; with or
// without a commit id, and also when the replica that answers the
// writer's reads of the tape has not stored the entries yet
// (laggingTape), which answers that they are not there.
func TestJetStreamIndexWhoseAnswerWasLostUnderAnotherCommit(t *testing.T) {
	f := newFixture(t)
	_, js := f.srv.JetStream(t)
	lossy := &lossyJS{JetStream: js}
	s, err := NewJetStreamStore(t.Context(), lossy, f.names)
	if err != nil {
		t.Fatal(err)
	}
	other := f.store(t)
	ctx := t.Context()
	for _, lag := range []bool{false, true} {
		for i, opts := range [][]AppendOption{{WithCommitID("run-1")}, nil} {
			tape := fmt.Sprintf("t%d-%v", i, lag)
			lagging := lagNow(t, s, tape) // a replica that has stored none of the tape
			if lag {
				s.stream = lagging
			}
			var otherErr error
			lossy.subject = f.names.TapeIndex(tape)
			lossy.onLoss = func() { _, otherErr = other.Append(ctx, tape, []Entry{userMsg("c")}) }
			lossy.lose.Store(true)
			got, err := s.Append(ctx, tape, []Entry{userMsg("a"), userMsg("b")}, opts...)
			s.stream = lagging.Stream
			if otherErr != nil {
				t.Fatal(otherErr)
			}
			if lossy.lose.Load() {
				t.Fatal("no index answer was lost")
			}
			if err != nil || !slices.Equal(contents(t, got), []string{"1:a", "2:b"}) {
				t.Fatalf("lagging %v, commit id %v: the append returned %q, %v; want its committed entries 1:a, 2:b", lag, opts != nil, contents(t, got), err)
			}
			wantContents(t, s, tape, "1:a", "2:b", "3:c")
		}
	}
}

// TestJetStreamIndexWhoseAnswerWasLostUnderAnEmptyCommit: on one server
// an append's index is stored but not acknowledged, and another writer
// commits an index of no entries on top of it (a watermark) before the
// index goes out again, which then fails the compare-and-set. No entry
// follows the append's, so only an index that ends at them tells that
// they are committed, and the replica that answers the writer's index
// reads lags: it keeps answering the index the append started from. The
// append must find its entries committed (not fail, nor store them a
// second time); with or without a commit id.
func TestJetStreamIndexWhoseAnswerWasLostUnderAnEmptyCommit(t *testing.T) {
	f := newFixture(t)
	_, js := f.srv.JetStream(t)
	lossy := &lossyJS{JetStream: js}
	s, err := NewJetStreamStore(t.Context(), lossy, f.names)
	if err != nil {
		t.Fatal(err)
	}
	other := f.store(t)
	ctx := t.Context()
	for i, opts := range [][]AppendOption{{WithCommitID("run-1")}, nil} {
		tape := fmt.Sprintf("t%d", i)
		if _, err := s.Append(ctx, tape, []Entry{userMsg("first")}); err != nil {
			t.Fatal(err)
		}
		subj := f.names.TapeIndex(tape)
		old, err := s.leaderGet(ctx, msgGetRequest{LastFor: subj})
		if err != nil {
			t.Fatal(err)
		}
		stale := staleLast{Stream: s.stream, subject: subj, last: old}
		s.stream = stale
		var otherErr error
		lossy.subject = subj
		lossy.onLoss = func() { _, otherErr = other.Append(ctx, tape, nil, WithWatermark("events", 1)) }
		lossy.lose.Store(true)
		got, err := s.Append(ctx, tape, []Entry{userMsg("a"), userMsg("b")}, opts...)
		s.stream = stale.Stream
		if otherErr != nil {
			t.Fatal(otherErr)
		}
		if lossy.lose.Load() {
			t.Fatal("no index answer was lost")
		}
		if err != nil || !slices.Equal(contents(t, got), []string{"2:a", "3:b"}) {
			t.Fatalf("commit id %v: the append returned %q, %v; want its committed entries 2:a, 3:b", opts != nil, contents(t, got), err)
		}
		wantContents(t, s, tape, "1:first", "2:a", "3:b")
		if ix, err := s.Index(ctx, tape); err != nil || ix.Watermark("events") != 1 {
			t.Fatalf("index %+v, %v; want the other writer's watermark", ix, err)
		}
	}
}

// TestJetStreamResetWhoseAnswerWasLostOnALaggingReplica: on one server
// a reset's index is stored but not acknowledged, so its retry fails the
// compare-and-set against itself, and the replica that answers the
// writer's index reads lags: it keeps answering the index the reset
// started from. The reset must find its index stored, neither fail with
// ErrConflict nor reset the tape a second time.
func TestJetStreamResetWhoseAnswerWasLostOnALaggingReplica(t *testing.T) {
	f := newFixture(t)
	_, js := f.srv.JetStream(t)
	lossy := &lossyJS{JetStream: js, subject: f.names.TapeIndex("t")}
	s, err := NewJetStreamStore(t.Context(), lossy, f.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("a"), userMsg("b")}); err != nil {
		t.Fatal(err)
	}
	old, err := s.leaderGet(ctx, msgGetRequest{LastFor: f.names.TapeIndex("t")})
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := f.srv.JetStream(t)
	published, err := nc.SubscribeSync(f.names.TapeIndex("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	stale := staleLast{Stream: s.stream, subject: f.names.TapeIndex("t"), last: old}
	s.stream = stale
	lossy.lose.Store(true)
	if err := s.Reset(ctx, "t"); err != nil {
		t.Fatalf("reset: %v", err)
	}
	s.stream = stale.Stream
	if lossy.lose.Load() {
		t.Fatal("no index answer was lost")
	}
	if err := nc.Flush(); err != nil { // every index sent is pending by now
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for {
		m, err := published.NextMsg(0)
		if err != nil {
			break
		}
		ids[m.Header.Get(subjects.HeaderMsgID)] = true
	}
	if len(ids) != 1 {
		t.Fatalf("indexes %v published, want the reset's only (sent again under its id)", slices.Sorted(maps.Keys(ids)))
	}
	wantContents(t, s, "t")
	if n := subjectMessages(t, s, "t"); n != 0 {
		t.Fatalf("%d messages left on the tape subject, want the reset's purge", n)
	}
}

// laggingTape answers the reads of the subject of a tape as a replica
// that has stored the stream up to last (nil: none of the subject) and
// stopped there would, every time: last as the subject's last message,
// none of the subject after it (message gets, consumers). Other reads
// pass through to the stream.
type laggingTape struct {
	jetstream.Stream
	subject string
	last    *jetstream.RawStreamMsg
}

// lagNow returns s's stream as a replica that stops applying it now would
// answer the reads of tape's subject.
func lagNow(t *testing.T, s *JetStreamStore, tape string) *laggingTape {
	t.Helper()
	subj := s.names.Tape(tape)
	last, err := s.leaderGet(t.Context(), msgGetRequest{LastFor: subj})
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}
	return &laggingTape{Stream: s.stream, subject: subj, last: last}
}

// upTo is the last stream sequence of the subject the replica stored.
func (l *laggingTape) upTo() uint64 {
	if l.last == nil {
		return 0
	}
	return l.last.Sequence
}

func (l *laggingTape) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if subject != l.subject {
		return l.Stream.GetLastMsgForSubject(ctx, subject)
	}
	if l.last == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return l.last, nil
}

func (l *laggingTape) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	m, err := l.Stream.GetMsg(ctx, seq, opts...)
	if err == nil && m.Subject == l.subject && m.Sequence > l.upTo() {
		return nil, jetstream.ErrMsgNotFound
	}
	return m, err
}

func (l *laggingTape) CreateConsumer(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := l.Stream.CreateConsumer(ctx, cfg)
	if err != nil || cfg.FilterSubject != l.subject {
		return c, err
	}
	return laggingConsumer{Consumer: c, upTo: l.upTo()}, nil
}

// laggingConsumer is a consumer on a replica that has stored the stream
// up to sequence upTo.
type laggingConsumer struct {
	jetstream.Consumer
	upTo uint64
}

func (c laggingConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	b, err := c.Consumer.FetchNoWait(n)
	if err != nil {
		return nil, err
	}
	msgs := make(chan jetstream.Msg, n)
	for m := range b.Messages() {
		if md, err := m.Metadata(); err == nil && md.Sequence.Stream <= c.upTo {
			msgs <- m
		}
	}
	close(msgs)
	return messageBatch{msgs, b.Error()}, nil
}

type messageBatch struct {
	msgs chan jetstream.Msg
	err  error
}

func (b messageBatch) Messages() <-chan jetstream.Msg { return b.msgs }
func (b messageBatch) Error() error                   { return b.err }

// TestJetStreamBatchMeetingItsOrphansOnALaggingReplica: on a 3-server
// cluster a commit retried after a crash sends its atomic batch, which
// the stream rejects as a duplicate of the crashed chain's orphans; the
// replica that answers the writer's reads of the tape lags: it has not
// stored the orphans and answers the tail the batch expected. That must
// not pass for the batch being stored, nor for no orphans: the append
// adopts the orphans and commits, never returns as committed a commit it
// did not store.
func TestJetStreamBatchMeetingItsOrphansOnALaggingReplica(t *testing.T) {
	s := newClusterFixture(t, natstest.StartCluster(t, 3)).store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
		t.Fatal(err)
	}
	lagging := lagNow(t, s, "t")
	crash(t, s, "t", []Entry{userMsg("a"), userMsg("b"), userMsg("c")}, 2, WithCommitID("run-1"))
	s.stream = lagging
	got, err := s.Append(ctx, "t", []Entry{userMsg("a"), userMsg("b"), userMsg("c")}, WithCommitID("run-1"))
	s.stream = lagging.Stream
	if err != nil || !slices.Equal(contents(t, got), []string{"2:a", "3:b", "4:c"}) {
		t.Fatalf("the append returned %q, %v", contents(t, got), err)
	}
	wantContents(t, s, "t", "1:first", "2:a", "3:b", "4:c")
}

// TestJetStreamAppendAfterAConflictReadsTheIndexFromTheLeader: another
// writer commits, and the replica that answers this store's index reads
// lags: it keeps answering the index from before that commit, and this
// store has seen none newer. The append that starts from it finds the
// other writer's entry after the committed ones and, with no grace for
// orphans, fences at once, which fails; the next attempt must read the
// index from the stream leader, not start from the old one again until
// it gives up with ErrConflict.
func TestJetStreamAppendAfterAConflictReadsTheIndexFromTheLeader(t *testing.T) {
	f := newFixture(t)
	s, other := f.store(t, WithOrphanGrace(0)), f.store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("a")}); err != nil {
		t.Fatal(err)
	}
	subj := f.names.TapeIndex("t")
	old, err := s.leaderGet(ctx, msgGetRequest{LastFor: subj})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Append(ctx, "t", []Entry{userMsg("b")}); err != nil {
		t.Fatal(err)
	}
	stale := staleLast{Stream: s.stream, subject: subj, last: old}
	s.stream = stale
	got, err := s.Append(ctx, "t", []Entry{userMsg("c")})
	s.stream = stale.Stream
	if err != nil || !slices.Equal(contents(t, got), []string{"3:c"}) {
		t.Fatalf("the append returned %q, %v", contents(t, got), err)
	}
	wantContents(t, s, "t", "1:a", "2:b", "3:c")
}

// TestJetStreamRepairsOrphansALaggingReplicaHasNotStored: a dead writer's
// orphans lie after the committed entries, and the replica that answers
// this store's reads of the tape (its tail, its messages, a consumer of
// it) has not stored them, and keeps answering so. The append must find
// them all the same, fence and delete them and commit after the committed
// entries: neither fail with ErrConflict (the tail it read matched the
// one its append expected, so it started over until it gave up) nor
// commit over orphans it did not read (inside the committed range they
// make the tape unreadable). As a chain on one server and as an atomic
// batch on a cluster.
func TestJetStreamRepairsOrphansALaggingReplicaHasNotStored(t *testing.T) {
	cluster := natstest.StartCluster(t, 3)
	for _, on := range layouts {
		t.Run(on, func(t *testing.T) {
			f := fixtureOn(t, on, cluster)
			s := f.store(t, WithOrphanGrace(0))
			ctx := t.Context()
			if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
				t.Fatal(err)
			}
			lagging := lagNow(t, s, "t")
			crash(t, s, "t", []Entry{userMsg("x"), userMsg("y")}, 2, WithCommitID("run-x"))
			s.stream = lagging
			got, err := s.Append(ctx, "t", []Entry{userMsg("b"), userMsg("c")})
			s.stream = lagging.Stream
			if err != nil || !slices.Equal(contents(t, got), []string{"2:b", "3:c"}) {
				t.Fatalf("the append returned %q, %v", contents(t, got), err)
			}
			if n := subjectMessages(t, s, "t"); n != 3 {
				t.Fatalf("%d messages on the tape subject, want the 3 committed (the orphans deleted)", n)
			}
			wantContents(t, s, "t", "1:first", "2:b", "3:c")
		})
	}
}

// TestJetStreamWritersOnTwoConnectionsNeverInterleave: two stores append
// batches to the same three tapes at once; every tape holds every batch
// whole, numbered in order (a batch's messages are stored consecutively,
// which the positions its index derives rely on).
func TestJetStreamWritersOnTwoConnectionsNeverInterleave(t *testing.T) {
	f := newFixture(t)
	stores := []*JetStreamStore{f.store(t), f.store(t)}
	tapes := []string{"t", "u", "v"}
	const batches, size = 12, 4
	var writers []writerOf
	for w, s := range stores {
		for _, tape := range tapes {
			writers = append(writers, writerOf{s, tape, fmt.Sprint("w", w)})
		}
	}
	appendAtOnce(t, writers, batches, func(w writerOf, b int) []Entry {
		batch := userMsgs(w.name, b, size)
		batch[size-1] = Anchor(fmt.Sprintf("%s-b%d-", w.name, b)+"3", nil)
		return batch
	})
	for _, tape := range tapes {
		got, err := f.store(t).Fetch(t.Context(), tape, All())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(stores)*batches*size {
			t.Fatalf("%d entries, want %d", len(got), len(stores)*batches*size)
		}
		name := func(e Entry) string {
			if n, ok := e.AnchorName(); ok {
				return n
			}
			return e.Payload["content"].(string)
		}
		for i := 0; i < len(got); i += size {
			prefix := name(got[i])
			prefix = prefix[:len(prefix)-1]
			for j, e := range got[i : i+size] {
				if e.ID != int64(i+j+1) || name(e) != fmt.Sprintf("%s%d", prefix, j) {
					t.Fatalf("entry %d is %d:%v, want %d:%s%d", i+j, e.ID, name(e), i+j+1, prefix, j)
				}
			}
		}
		// Every position the index derived holds its entry.
		ix, err := f.store(t).Index(t.Context(), tape)
		if err != nil || len(ix.RecentAnchors) == 0 {
			t.Fatalf("index %+v, %v", ix, err)
		}
		for _, a := range append(ix.RecentAnchors, AnchorRef{ID: 1, Seq: ix.FirstSeq}, AnchorRef{ID: ix.LastID, Seq: ix.Seq}) {
			m, err := stores[0].stream.GetMsg(t.Context(), a.Seq)
			if err != nil {
				t.Fatal(err)
			}
			if e, ok := decodeMessage(m.Data); !ok || e.ID != a.ID || m.Subject != f.names.Tape(tape) {
				t.Fatalf("position %d holds %s, want entry %d of %s", a.Seq, m.Data, a.ID, tape)
			}
		}
	}
}

// TestJetStreamConcurrentChainsPublishEachEntryOnce: one store (the
// recorder's) appending to many tapes at once on one replica, where an
// append is a checked chain whose pipelined entries predict their stream
// sequences. No index of another tape lands inside a chain, so no
// prediction fails: every entry is published once (a failed prediction
// publishes the entry again, one by one). Before the index was sent under
// the store's send lock, 16 lanes of 10-entry appends published about 8
// entries twice per append.
func TestJetStreamConcurrentChainsPublishEachEntryOnce(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	nc, _ := f.srv.JetStream(t)
	// Every message on the tapes' subjects, pending here until counted.
	sub, err := nc.SubscribeSync(f.names.TapesAll())
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const lanes, appends, size = 16, 8, 10
	writers := make([]writerOf, lanes)
	for l := range writers {
		writers[l] = writerOf{s, fmt.Sprint("lane", l), fmt.Sprint("l", l)}
	}
	appendAtOnce(t, writers, appends, func(w writerOf, b int) []Entry { return userMsgs(w.name, b, size) })
	if err := nc.Flush(); err != nil { // every copy is pending by now
		t.Fatal(err)
	}
	const want = lanes * appends * size
	for l := range lanes {
		if n := subjectMessages(t, s, fmt.Sprint("lane", l)); n != appends*size {
			t.Fatalf("lane %d: %d entries stored, want %d", l, n, appends*size)
		}
	}
	if got, _, err := sub.Pending(); err != nil || got != want {
		t.Errorf("%d entries published for %d stored (%v): predictions failed and entries went out again", got, want, err)
	}
}

func TestJetStreamRecoversFromAnInterruptedReset(t *testing.T) {
	s := newFixture(t).store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("old1"), userMsg("old2")}); err != nil {
		t.Fatal(err)
	}
	// The reset committed its index but died before purging the entries.
	ix, err := s.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.putIndex(ctx, ix.next(nil, nil, appendOptions{reset: true}), ix.Revision, "reset"); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t")
	if _, err := s.Append(ctx, "t", []Entry{userMsg("new")}); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t", "1:new")
	if n := subjectMessages(t, s, "t"); n != 1 {
		t.Fatalf("%d messages left on the tape subject, want 1 (the leftovers purged)", n)
	}
}

func TestJetStreamReadsLeaveNoConsumers(t *testing.T) {
	s := newFixture(t).store(t)
	ctx := t.Context()
	batch := make([]Entry, 40)
	for i := range batch {
		batch[i] = userMsg(fmt.Sprint(i))
	}
	batch[5] = Anchor("a", nil)
	if _, err := s.Append(ctx, "t", batch); err != nil {
		t.Fatal(err)
	}
	for _, q := range []Query{All(), All().LastAnchor(), All().Limit(2), All().Kinds(KindAnchor)} {
		if _, err := s.Fetch(ctx, "t", q); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("%d consumers left after reads", info.State.Consumers)
	}
}

func TestJetStreamStoreRebinds(t *testing.T) {
	f := newFixture(t)
	if _, err := f.store(t).Append(t.Context(), "t", []Entry{userMsg("kept")}); err != nil {
		t.Fatal(err)
	}
	wantContents(t, f.store(t, WithoutProvisioning()), "t", "1:kept")

	_, js := f.srv.JetStream(t)
	other, err := subjects.New("unprovisioned")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewJetStreamStore(t.Context(), js, other, WithoutProvisioning()); err == nil {
		t.Fatal("binding to a missing stream succeeded")
	}
	for _, opt := range []JetStreamOption{WithReplicas(0), WithOrphanGrace(-time.Second), WithEntryCache(-1)} {
		if _, err := NewJetStreamStore(t.Context(), js, other, opt); err == nil {
			t.Fatal("invalid option accepted")
		}
	}
}

func TestJetStreamRetriesAStaleIndex(t *testing.T) {
	s := newFixture(t).store(t)
	if _, err := s.Append(t.Context(), "t", []Entry{userMsg("x")}); err != nil {
		t.Fatal(err)
	}
	ix, err := s.Index(t.Context(), "t")
	if err != nil || ix.Revision == 0 {
		t.Fatalf("index %+v, %v", ix, err)
	}
	// Pretend this store saw a newer revision than any replica can serve.
	s.observe(Index{Tape: "t", Revision: ix.Revision + 100})
	if _, err := s.Index(t.Context(), "t"); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale index read: %v, want ErrConflict", err)
	}
}

// An archive read that stops short of the archive's last message (a
// consumer on a replica that has not stored it yet, or a message the
// stream's limits deleted) is read again and then fails, naming how far it
// got: never a silently shorter archive.
func TestJetStreamReadArchiveNeverReturnsPart(t *testing.T) {
	s := newFixture(t).store(t)
	stored, err := s.Append(t.Context(), "t", []Entry{userMsg("a"), userMsg("b"), userMsg("c")})
	if err != nil {
		t.Fatal(err)
	}
	loc, err := s.Archive(t.Context(), "t", stored)
	if err != nil {
		t.Fatal(err)
	}
	_, span, _ := strings.Cut(strings.TrimPrefix(loc, s.names.TapesStream()+":"), ":")
	lo, hi, _ := strings.Cut(span, "-")
	first, _ := strconv.ParseUint(lo, 10, 64)
	last, _ := strconv.ParseUint(hi, 10, 64)
	if last != first+2 {
		t.Fatalf("location %q, want three sequences", loc)
	}
	if got, err := s.ReadArchive(t.Context(), loc); err != nil || len(got) != 3 {
		t.Fatalf("whole archive: %v, %v", got, err)
	}
	if err := s.stream.DeleteMsg(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadArchive(t.Context(), loc)
	if want := fmt.Sprintf("up to sequence %d of %d", last-1, last); err == nil || !strings.Contains(err.Error(), want) || got != nil {
		t.Fatalf("archive without its last message: %v, %v; want an error with %q", got, err, want)
	}
}

// meddlingJS runs meddle once, just before it sends the message number
// at (from 1) on subject.
type meddlingJS struct {
	jetstream.JetStream
	subject string
	at      int
	meddle  func()
	sent    int
}

func (j *meddlingJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if m.Subject == j.subject {
		if j.sent++; j.sent == j.at {
			j.meddle()
		}
	}
	return j.JetStream.PublishMsgAsync(m, opts...)
}

// TestJetStreamReadArchiveReadsOnlyItsOwnMessages: two archives of one
// tape written at once (two recorders) interleave on the tape's archive
// subject, here all of the second between the first's second and last
// message. Each reads back as its own entries, never the other's; the
// first one without its last message is still never returned in part.
func TestJetStreamReadArchiveReadsOnlyItsOwnMessages(t *testing.T) {
	f := newFixture(t)
	s, other := f.store(t), f.store(t)
	ctx := t.Context()
	mine := []Entry{userMsg("a"), userMsg("b"), userMsg("c")}
	theirs := []Entry{userMsg("x"), userMsg("y")}
	for i := range mine {
		mine[i].ID = int64(i + 1)
	}
	for i := range theirs {
		theirs[i].ID = int64(i + 1)
	}
	var theirLoc string
	s.js = &meddlingJS{JetStream: s.js, subject: s.names.TapeArchive("t"), at: 3, meddle: func() {
		natstest.Eventually(t, 5*time.Second, func() (bool, string) {
			info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(s.names.TapeArchive("t")))
			n := uint64(0)
			if err == nil {
				n = info.State.Subjects[s.names.TapeArchive("t")]
			}
			return n == 2, fmt.Sprintf("%d messages archived, want the first two: %v", n, err)
		})
		var err error
		if theirLoc, err = other.Archive(ctx, "t", theirs); err != nil {
			t.Error(err)
		}
	}}
	loc, err := s.Archive(ctx, "t", mine)
	if err != nil || theirLoc == "" {
		t.Fatalf("archives at %q, %q: %v", loc, theirLoc, err)
	}
	first, last := archiveSpan(t, loc)
	theirFirst, theirLast := archiveSpan(t, theirLoc)
	if theirFirst <= first || theirLast >= last {
		t.Fatalf("archives at %q and %q, want the second inside the first", loc, theirLoc)
	}
	for _, c := range []struct {
		loc  string
		want []string
	}{{loc, []string{"1:a", "2:b", "3:c"}}, {theirLoc, []string{"1:x", "2:y"}}} {
		got, err := s.ReadArchive(ctx, c.loc)
		if err != nil {
			t.Fatal(err)
		}
		if g := contents(t, got); !slices.Equal(g, c.want) {
			t.Fatalf("archive %q reads %q, want %q", c.loc, g, c.want)
		}
	}
	if err := s.stream.DeleteMsg(ctx, last); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadArchive(ctx, loc)
	if want := fmt.Sprintf("up to sequence %d of %d", theirLast, last); err == nil || !strings.Contains(err.Error(), want) || got != nil {
		t.Fatalf("archive without its last message: %q, %v; want an error with %q", contents(t, got), err, want)
	}
}

// archiveSpan returns the first and last stream sequence of the archive
// at loc.
func archiveSpan(t *testing.T, loc string) (first, last uint64) {
	t.Helper()
	i := strings.LastIndex(loc, ":")
	lo, hi, _ := strings.Cut(loc[i+1:], "-")
	first, err1 := strconv.ParseUint(lo, 10, 64)
	last, err2 := strconv.ParseUint(hi, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("location %q", loc)
	}
	return first, last
}

// An index passed with WithIndex saves the first read; a stale one (the
// tape moved on since, also under the same commit id) costs a retry,
// never a lost, misnumbered or duplicated entry.
func TestJetStreamAppendFromAGivenIndex(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	ctx := t.Context()
	ix, err := s.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "t", []Entry{userMsg("a")}, WithIndex(ix)); err != nil {
		t.Fatal(err)
	}
	// ix is stale now: another store instance appended meanwhile.
	if _, err := f.store(t).Append(ctx, "t", []Entry{userMsg("b")}, WithCommitID("c2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "t", []Entry{userMsg("c")}, WithIndex(ix), WithCommitID("c3")); err != nil {
		t.Fatal(err)
	}
	// A stale index that lacks the commit: the commit is not written twice.
	if _, err := s.Append(ctx, "t", []Entry{userMsg("b")}, WithIndex(ix), WithCommitID("c2")); err != nil {
		t.Fatal(err)
	}
	// An index of another tape is not used.
	other, _ := s.Index(ctx, "other")
	if _, err := s.Append(ctx, "t", []Entry{userMsg("d")}, WithIndex(other)); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t", "1:a", "2:b", "3:c", "4:d")
}

// On a replicated stream the leader answers a message id it stored within
// the duplicate window as a duplicate before it checks the expected last
// sequence: a commit retried after a crash must adopt its own stored
// entries from that answer (not take it for another writer and retry
// until the window has passed). There the retry is an atomic batch, which
// adopts what the crashed chain stored and sends the rest; the index then
// locates the whole commit, so replaying it once more returns its entries.
func TestJetStreamAdoptsOrphansOnACluster(t *testing.T) {
	s := newClusterFixture(t, natstest.StartCluster(t, 3)).store(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
		t.Fatal(err)
	}
	crash(t, s, "t", []Entry{userMsg("a"), userMsg("b"), userMsg("c")}, 2, WithCommitID("run-1"))
	start := time.Now()
	if _, err := s.Append(ctx, "t", []Entry{userMsg("a"), userMsg("b"), userMsg("c")}, WithCommitID("run-1")); err != nil {
		t.Fatalf("retrying the commit after %v: %v", time.Since(start), err)
	}
	wantContents(t, s, "t", "1:first", "2:a", "3:b", "4:c")
	ix, err := s.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := ix.Commit("run-1"); !ok || c.FirstSeq == 0 || c.LastSeq < c.FirstSeq {
		t.Fatalf("run-1 in the index: %+v (found %v), want both ends located", c, ok)
	}
	again, err := s.Append(ctx, "t", []Entry{userMsg("a"), userMsg("b"), userMsg("c")}, WithCommitID("run-1"))
	if err != nil {
		t.Fatalf("replaying the committed run-1: %v", err)
	}
	if got := contents(t, again); !slices.Equal(got, []string{"2:a", "3:b", "4:c"}) {
		t.Fatalf("the replay returned %v, want run-1's entries", got)
	}
	wantContents(t, s, "t", "1:first", "2:a", "3:b", "4:c")
	crash(t, s, "t", []Entry{userMsg("d")}, 1, WithCommitID("run-2"))
	if _, err := s.Append(ctx, "t", []Entry{userMsg("d")}, WithCommitID("run-2")); err != nil {
		t.Fatal(err)
	}
	wantContents(t, s, "t", "1:first", "2:a", "3:b", "4:c", "5:d")
}

// TestJetStreamListsMoreTapesThanOneRead: List reads every tape's index
// however many there are (more than one fetch, or one batched direct get,
// returns).
func TestJetStreamListsMoreTapesThanOneRead(t *testing.T) {
	s := newFixture(t).store(t)
	const n = fetchChunk + 50
	for i := range n {
		if _, err := s.Append(t.Context(), fmt.Sprintf("t%04d", i), []Entry{userMsg("x")}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(t.Context())
	if err != nil || len(got) != n || got[0] != "t0000" || got[n-1] != fmt.Sprintf("t%04d", n-1) {
		t.Fatalf("listed %d tapes (%v), want %d", len(got), err, n)
	}
}

// TestJetStreamWatermarkWaitOutlivesItsConsumer: on a 3-server cluster a
// read-your-writes wait follows the tape's index through a consumer on
// another server than its own connection's; that server dies mid-wait
// (the wait's connection does not move, so only the consumer's heartbeats
// tell), the run the wait is for is committed meanwhile, and the wait
// still returns its watermark well within its 5s: its follower notices
// the lost consumer within a second and makes it again. Neither the
// commit's writer nor the stream's leader is on that server: a writer
// reconnecting, or the stream electing a leader (4–9 s), would hold the
// commit itself past the wait's 5s. It logs how long the wait took after
// the commit, and whether the server led the JetStream meta group.
func TestJetStreamWatermarkWaitOutlivesItsConsumer(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	f := newClusterFixture(t, c)
	if _, err := f.store(t).Append(t.Context(), "t", []Entry{userMsg("a")}, WithWatermark("events", 1)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ix  Index
		err error
		at  time.Time
	}
	var (
		got  chan result
		host string
	)
	// A wait whose consumer lives on its own connection's server would
	// see that connection drop, and one on the stream leader would wait
	// out an election: try the servers, a few rounds, until a consumer
	// lands on neither.
	for i := 0; host == "" && i < 3*len(c.Servers); i++ {
		own := c.Servers[i%len(c.Servers)]
		w := f.on(own).store(t, WithoutProvisioning())
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // the workers' ReadYourWrites
		t.Cleanup(cancel)
		got = make(chan result, 1)
		go func() {
			ix, err := w.WaitWatermark(ctx, "t", "events", 2)
			got <- result{ix, err, time.Now()}
		}()
		var h string
		natstest.Eventually(t, 5*time.Second, func() (bool, string) {
			l := w.stream.ListConsumers(t.Context())
			for ci := range l.Info() {
				if ci.Cluster != nil {
					h = ci.Cluster.Leader
				}
			}
			return h != "", "the wait has no consumer yet"
		})
		if h != own.Name() && h != c.StreamLeader(t, w.js, f.names.TapesStream()).Name() {
			host = h
		} else {
			cancel()
			<-got
		}
	}
	if host == "" {
		t.Skip("every wait's consumer was on its own connection's server or the stream leader")
	}
	metaLeader := false
	var survivor *natstest.Server
	for _, s := range c.Servers {
		if s.Name() == host {
			metaLeader = s.JetStreamIsLeader()
			s.Shutdown()
		} else {
			survivor = s
		}
	}
	lateWriter := f.on(survivor).store(t, WithoutProvisioning())
	var committed time.Time
	natstest.Eventually(t, time.Minute, func() (bool, string) {
		_, err := lateWriter.Append(t.Context(), "t", []Entry{userMsg("b")}, WithWatermark("events", 2), WithCommitID("run-2"))
		committed = time.Now()
		return err == nil, fmt.Sprint(err)
	})
	r := <-got
	if r.err != nil || r.ix.Watermark("events") != 2 {
		t.Fatalf("the wait ended with watermark %d: %v", r.ix.Watermark("events"), r.err)
	}
	t.Logf("the server of the wait's consumer (%s, meta leader %t) died; the wait returned %s after the commit", host, metaLeader, max(0, r.at.Sub(committed)).Round(100*time.Millisecond))
}

// TestRevisionsStayBounded: a store observes the index of every tape it
// touches. It remembers the newest revision of the tapes it touched last,
// refusing an older one (served by a replica that lags), and forgets the
// others instead of growing with every session a long-running service
// ever touched; a forgotten tape takes any revision, as after a restart.
func TestRevisionsStayBounded(t *testing.T) {
	var r revisions
	const tapes = 5 * revisionsKept
	for i := range tapes {
		if !r.observe(strconv.Itoa(i), 2) {
			t.Fatalf("tape %d: its first revision refused", i)
		}
		if r.observe(strconv.Itoa(i), 1) {
			t.Fatalf("tape %d: an older revision taken", i)
		}
	}
	if n := len(r.cur) + len(r.old); n > 2*revisionsKept {
		t.Fatalf("%d tapes remembered after %d observed, want at most %d", n, tapes, 2*revisionsKept)
	}
	for i := tapes - revisionsKept; i < tapes; i++ {
		if r.observe(strconv.Itoa(i), 1) {
			t.Fatalf("tape %d, among the last %d observed: an older revision taken", i, revisionsKept)
		}
	}
	if !r.observe("0", 1) {
		t.Fatal("a tape forgotten long ago refused a revision")
	}
}
