package tape

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
)

// apiCounter counts the JetStream API requests of a server by kind
// ("DIRECT.GET", "CONSUMER.CREATE", …).
type apiCounter struct {
	nc  *nats.Conn
	got chan *nats.Msg
}

func countAPI(t *testing.T, f jsFixture) *apiCounter {
	t.Helper()
	nc, _ := f.srv.JetStream(t)
	c := &apiCounter{nc: nc, got: make(chan *nats.Msg, 1<<16)}
	sub, err := nc.ChanSubscribe("$JS.API.>", c.got)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// take returns the counts of the requests answered so far and starts
// over. The server routed each to the counter before it answered it, so
// after a round trip of the counter's connection they are all in its
// channel.
func (c *apiCounter) take(t *testing.T) map[string]int {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for {
		select {
		case m := <-c.got:
			parts := strings.Split(m.Subject, ".")
			n[strings.Join(parts[2:min(4, len(parts))], ".")]++
		default:
			return n
		}
	}
}

// appendNumbered appends n user messages "0", "1", … with an anchor at
// index anchorAt, in one batch.
func appendNumbered(t *testing.T, s *JetStreamStore, tape string, n, anchorAt int) {
	t.Helper()
	batch := make([]Entry, n)
	for i := range batch {
		batch[i] = userMsg(fmt.Sprint(i))
	}
	batch[anchorAt] = Anchor("a", nil)
	if _, err := s.Append(t.Context(), tape, batch); err != nil {
		t.Fatal(err)
	}
}

// TestJetStreamReadsCommittedEntriesWithDirectGets: a read of committed
// entries is one batched direct get per 1,024 entries, and creates no
// consumer.
func TestJetStreamReadsCommittedEntriesWithDirectGets(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	appendNumbered(t, s, "t", 1100, 1049)
	api := countAPI(t, f)
	for _, c := range []struct {
		q    Query
		want int // entries
		gets int // direct gets of entries
	}{
		{All().LastAnchor(), 50, 1}, // after the anchor
		{All(), 1100, 2},
		{All().Limit(3), 3, 1},
	} {
		s.cache = newEntryCache(entryCacheBytes) // read from the stream each time
		entries, err := s.Fetch(t.Context(), "t", c.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != c.want {
			t.Fatalf("%d entries, want %d", len(entries), c.want)
		}
		got := api.take(t)
		// the index is a direct get of its own
		if got["DIRECT.GET"] != c.gets+1 || got["CONSUMER.CREATE"] != 0 || len(got) != 1 {
			t.Fatalf("API requests %v, want %d direct gets of entries, 1 of the index, nothing else", got, c.gets)
		}
	}
}

// TestJetStreamReadsWhatALaggingReplicaMissesFromTheLeader: a replica
// that answers the direct gets with fewer entries than the index commits
// (here a responder that passes on only the first few), or not at all,
// costs a read of the rest from the stream leader, never a short read.
func TestJetStreamReadsWhatALaggingReplicaMissesFromTheLeader(t *testing.T) {
	f := newFixture(t)
	s := f.store(t)
	appendNumbered(t, s, "t", 40, 0)
	real := s.directSubject
	nc, _ := f.srv.JetStream(t)
	for _, keep := range []int{0, 5, 39} {
		s.directSubject = fmt.Sprintf("lagging.%d", keep)
		sub, err := nc.Subscribe(s.directSubject, func(m *nats.Msg) {
			if keep == 0 {
				return // no answer: the request times out
			}
			var req directRequest
			if err := json.Unmarshal(m.Data, &req); err != nil {
				t.Error(err)
				return
			}
			req.Batch = min(req.Batch, keep)
			body, _ := json.Marshal(req)
			inbox := nats.NewInbox()
			answers, _ := nc.SubscribeSync(inbox)
			defer answers.Unsubscribe()
			_ = nc.PublishRequest(real, inbox, body)
			for {
				a, err := answers.NextMsg(jsretry.ReadAttempt)
				if err != nil {
					t.Error(err)
					return
				}
				_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: a.Header, Data: a.Data})
				if a.Header.Get(subjects.HeaderStatus) != "" {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		api := countAPI(t, f)
		s.cache = newEntryCache(entryCacheBytes) // read from the stream each time
		entries, err := s.Fetch(t.Context(), "t", All())
		_ = sub.Unsubscribe()
		if err != nil {
			t.Fatalf("keeping %d: %v", keep, err)
		}
		if len(entries) != 40 || entries[39].ID != 40 {
			t.Fatalf("keeping %d: %d entries", keep, len(entries))
		}
		if got := api.take(t); got["CONSUMER.CREATE"] != 1 {
			t.Fatalf("keeping %d: API requests %v, want one consumer for the rest", keep, got)
		}
	}
}

// TestJetStreamReadsAStreamWithoutDirectGets: a tapes stream created
// before direct gets (AllowDirect false), bound without provisioning,
// is read from the leader as before.
func TestJetStreamReadsAStreamWithoutDirectGets(t *testing.T) {
	f := newFixture(t)
	_, js := f.srv.JetStream(t)
	sc := StreamConfig(f.names)
	sc.AllowDirect = false
	if _, err := js.CreateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	s := f.store(t, WithoutProvisioning())
	if s.directSubject != "" {
		t.Fatalf("direct gets on a stream without them: %q", s.directSubject)
	}
	appendNumbered(t, s, "t", 20, 0)
	for _, q := range []Query{All(), All().Limit(3)} {
		entries, err := s.Fetch(t.Context(), "t", q)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(entries); n != 20 && n != 3 {
			t.Fatalf("%d entries", n)
		}
	}
}

// directSnapshot records the answer of the stream's direct gets to a
// batched direct get of every message of tape's subject: the messages
// and the end-of-batch status, as a replica that stops applying the
// stream now would keep answering.
func directSnapshot(t *testing.T, nc *nats.Conn, s *JetStreamStore, tape string) (msgs []*nats.Msg, eob *nats.Msg) {
	t.Helper()
	req, _ := json.Marshal(directRequest{Seq: 1, NextFor: s.names.Tape(tape), Batch: 1000})
	inbox := nats.NewInbox()
	answers, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer answers.Unsubscribe()
	if err := nc.PublishRequest(s.directSubject, inbox, req); err != nil {
		t.Fatal(err)
	}
	for {
		a, err := answers.NextMsg(jsretry.ReadAttempt)
		if err != nil {
			t.Fatal(err)
		}
		if a.Header.Get(subjects.HeaderStatus) != "" {
			return msgs, a
		}
		msgs = append(msgs, a)
	}
}

// laggingReplica answers every batched direct get sent to subject from
// the snapshot msgs, eob (see directSnapshot), as a replica that stopped
// applying the stream would. It returns the number of requests answered
// so far. It answers nothing once the test's cleanup began: an answer
// still being sent then finishes first (Unsubscribe alone does not wait
// for it, and its publish would fail on the closed connection after the
// test completed).
func laggingReplica(t *testing.T, nc *nats.Conn, subject string, msgs []*nats.Msg, eob *nats.Msg) func() int64 {
	t.Helper()
	var (
		n       atomic.Int64
		mu      sync.Mutex
		stopped bool
	)
	reply := func(to string, a *nats.Msg) {
		if err := nc.PublishMsg(&nats.Msg{Subject: to, Header: a.Header, Data: a.Data}); err != nil {
			t.Error(err)
		}
	}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		var req directRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		n.Add(1)
		sent := 0
		for _, a := range msgs {
			seq, _ := strconv.ParseUint(a.Header.Get(jetstream.SequenceHeader), 10, 64)
			if seq >= req.Seq && sent < req.Batch {
				reply(m.Reply, a)
				sent++
			}
		}
		reply(m.Reply, eob)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sub.Unsubscribe()
		mu.Lock()
		stopped = true
		mu.Unlock()
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return n.Load
}

// onFollower is a fixture with f's names on a server of c that does not
// lead f's tapes stream: its stores' requests reach the leader through
// another server.
func onFollower(t *testing.T, c *natstest.Cluster, f jsFixture) jsFixture {
	t.Helper()
	_, js := f.srv.JetStream(t)
	leader := c.StreamLeader(t, js, f.names.TapesStream())
	for _, srv := range c.Servers {
		if srv != leader {
			return f.on(srv)
		}
	}
	t.Fatal("no follower")
	return jsFixture{}
}

// TestJetStreamNeverReadsFencedOrphansFromALaggingReplica: the orphans a
// writer fenced and deleted lie inside the range the next index commits
// and carry the ids of the entries that replaced them. A replica that has
// not applied the deletes (here a responder that answers every direct get
// from a snapshot taken before the fence) answers them with the right ids
// and count, but not at the positions the index names: the read is stale
// and is read again from the stream leader at once, so the replica costs
// a slower read, never a failure (it was ErrConflict once the retries
// were spent) nor a stale entry, cached or returned. On a cluster the
// reader is connected to a follower.
func TestJetStreamNeverReadsFencedOrphansFromALaggingReplica(t *testing.T) {
	cluster := natstest.StartCluster(t, 3)
	for _, on := range layouts {
		for _, c := range []struct {
			name string
			opts []AppendOption // of the commit over the orphans
			q    Query
			want []string
		}{
			// the read ends at the index's last entry
			{"whole tape", nil, All(), []string{"1:first", "2:b", "3:c"}},
			// the read meets the first entry of a remembered commit
			{"limited read of a commit with an id", []AppendOption{WithCommitID("run-b")}, All().Limit(2), []string{"1:first", "2:b"}},
		} {
			t.Run(on+"/"+c.name, func(t *testing.T) {
				f := fixtureOn(t, on, cluster)
				s := f.store(t, WithOrphanGrace(0))
				reader := f
				if on == "cluster" {
					reader = onFollower(t, cluster, f)
				}
				ctx := t.Context()
				if _, err := s.Append(ctx, "t", []Entry{userMsg("first")}); err != nil {
					t.Fatal(err)
				}
				crash(t, s, "t", []Entry{userMsg("x"), userMsg("y"), userMsg("z")}, 3, WithCommitID("run-x"))
				nc, _ := f.srv.JetStream(t)
				var msgs []*nats.Msg
				var eob *nats.Msg
				natstest.Eventually(t, 5*time.Second, func() (bool, string) {
					msgs, eob = directSnapshot(t, nc, s, "t") // any replica answers
					return len(msgs) == 4, fmt.Sprintf("snapshot of %d messages, want the committed one and 3 orphans", len(msgs))
				})
				if _, err := f.store(t, WithOrphanGrace(0)).Append(ctx, "t", []Entry{userMsg("b"), userMsg("c")}, c.opts...); err != nil {
					t.Fatal(err)
				}
				if n := subjectMessages(t, s, "t"); n != 3 {
					t.Fatalf("%d messages on the tape subject, want the orphans deleted", n)
				}

				r := reader.store(t, WithoutProvisioning())
				natstest.Eventually(t, 5*time.Second, func() (bool, string) {
					// the reader's server has the last commit, so the
					// reader knows its index from now on
					ix, err := r.Index(ctx, "t")
					return err == nil && ix.LastID == 3, fmt.Sprintf("index %+v, %v", ix, err)
				})
				r.directSubject = "lagging." + f.names.TapesStream()
				requests := laggingReplica(t, nc, r.directSubject, msgs, eob)
				for i := range 2 { // the second read takes the first one's from the cache
					got, err := r.Fetch(ctx, "t", c.q)
					if err != nil {
						t.Fatalf("read %d: %v", i+1, err)
					}
					if g := contents(t, got); !slices.Equal(g, c.want) {
						t.Fatalf("read %d: %q, want %q", i+1, g, c.want)
					}
				}
				if n := requests(); n != 1 {
					t.Fatalf("%d direct gets, want only the stale one", n)
				}
				ix, err := r.Index(ctx, "t")
				if err != nil {
					t.Fatal(err)
				}
				if cached, _ := r.cache.get("t", ix.FirstSeq, 1, ix.Entries, false); !slices.Equal(contents(t, cached), c.want) {
					t.Fatalf("cached %q, want %q", contents(t, cached), c.want)
				}
			})
		}
	}
}

// staleLast answers every read of the last message of subject with
// last, as a replica that stopped applying the stream after it would.
type staleLast struct {
	jetstream.Stream
	subject string
	last    *jetstream.RawStreamMsg
}

func (s staleLast) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if subject == s.subject {
		return s.last, nil
	}
	return s.Stream.GetLastMsgForSubject(ctx, subject)
}

// TestJetStreamReadsAStaleIndexFromTheLeader: a replica that lags
// answers the direct get of a tape's index with an older revision than
// the store has seen, here always: the store reads the index from the
// stream leader instead, at once, so reads and appends go on (they
// failed with ErrConflict once the retries were spent). On a cluster the
// store is connected to a follower.
func TestJetStreamReadsAStaleIndexFromTheLeader(t *testing.T) {
	cluster := natstest.StartCluster(t, 3)
	for _, on := range layouts {
		t.Run(on, func(t *testing.T) {
			f := fixtureOn(t, on, cluster)
			if on == "cluster" {
				f.store(t) // provisions the stream
				f = onFollower(t, cluster, f)
			}
			s := f.store(t)
			ctx := t.Context()
			if _, err := s.Append(ctx, "t", []Entry{userMsg("a")}); err != nil {
				t.Fatal(err)
			}
			subj := s.names.TapeIndex("t")
			var old *jetstream.RawStreamMsg
			natstest.Eventually(t, 5*time.Second, func() (bool, string) {
				var err error
				old, err = s.stream.GetLastMsgForSubject(ctx, subj) // any replica answers
				return err == nil, fmt.Sprint(err)
			})
			if _, err := s.Append(ctx, "t", []Entry{userMsg("b")}); err != nil {
				t.Fatal(err)
			}
			s.stream = staleLast{Stream: s.stream, subject: subj, last: old}
			ix, err := s.Index(ctx, "t")
			if err != nil || ix.LastID != 2 || ix.Revision <= old.Sequence {
				t.Fatalf("index %+v, %v; want the second revision", ix, err)
			}
			if _, err := s.Append(ctx, "t", []Entry{userMsg("c")}); err != nil {
				t.Fatal(err)
			}
			wantContents(t, s, "t", "1:a", "2:b", "3:c")
		})
	}
}

// TestSeededForkReadsItsContextFromTheSeed: a run's fork seeded with the
// index its turn read when it started (Fork.Seed) reads its context, the
// entries after the last anchor, without reading the index again: only
// the direct get of the entries; the fork's next read of the store reads
// the index. The seed is the run's snapshot of the tape: a seed whose
// entries a reset purged since reads what the tape holds then (the read
// goes back to the index).
func TestSeededForkReadsItsContextFromTheSeed(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t)
	s := f.store(t)
	appendNumbered(t, s, "t", 10, 4)
	nc, _ := f.srv.JetStream(t)
	indexReads, err := nc.SubscribeSync(s.directSubject + "." + f.names.TapeIndex("t"))
	if err != nil {
		t.Fatal(err)
	}
	api := countAPI(t, f)
	contents := func(entries []Entry) []string {
		var out []string
		for _, e := range entries {
			if c, ok := e.Payload["content"].(string); ok {
				out = append(out, c)
			}
		}
		return out
	}
	// reads returns the index reads and the API requests since the last
	// call. The server routed each read to indexReads before it answered
	// it, so after a round trip of indexReads' own connection they are all
	// pending there (api.take makes the round trip of another one).
	reads := func() (int, map[string]int) {
		t.Helper()
		got := api.take(t)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := indexReads.Pending()
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := indexReads.NextMsg(time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return n, got
	}

	ix, err := s.Index(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	reads()
	fork := NewFork(s)
	fork.Seed("t", ix)
	s.cache = newEntryCache(entryCacheBytes) // the entries come from the stream
	got, err := fork.Fetch(ctx, "t", All().LastAnchor())
	if want := []string{"5", "6", "7", "8", "9"}; err != nil || !slices.Equal(contents(got), want) {
		t.Fatalf("context %v (%v), want %v", contents(got), err, want)
	}
	if n, api := reads(); n != 0 || api["DIRECT.GET"] != 1 || len(api) != 1 {
		t.Fatalf("the seeded read made %d index reads and API requests %v, want no index read and 1 direct get (the entries)", n, api)
	}
	if _, err := fork.Fetch(ctx, "t", All().LastAnchor()); err != nil {
		t.Fatal(err)
	}
	if n, _ := reads(); n != 1 {
		t.Fatalf("the next read made %d index reads, want 1 (a seed serves one read)", n)
	}

	// The tape is reset after the seed was read: the seed's entries are
	// purged.
	if _, err := s.Append(ctx, "t", []Entry{Anchor("b", nil), userMsg("new")}, WithReset()); err != nil {
		t.Fatal(err)
	}
	s.cache = newEntryCache(entryCacheBytes) // the seed's entries are gone
	stale := NewFork(s)
	stale.Seed("t", ix)
	got, err = stale.Fetch(ctx, "t", All().LastAnchor())
	if want := []string{"new"}; err != nil || !slices.Equal(contents(got), want) {
		t.Fatalf("context from a stale seed %v (%v), want %v", contents(got), err, want)
	}
}

// TestContextReadsLendTheCachedEntries: the default context read of a
// run's fork takes the store's cached entries as they are (no copy per
// entry per turn: the cached payloads themselves reach the selector);
// any other read, a custom selector's included, gets copies, so a
// selector that changes what it is given changes nothing another read
// sees.
func TestContextReadsLendTheCachedEntries(t *testing.T) {
	ctx := t.Context()
	s := newFixture(t).store(t)
	appendNumbered(t, s, "t", 6, 2)
	fork := NewFork(s)
	if _, err := fork.Fetch(ctx, "t", All()); err != nil { // the cache holds the tape
		t.Fatal(err)
	}
	cached, _ := s.cache.get("t", 1, 1, 6, true)
	var given []Entry
	// The default selector's read, observed through the fork's shared
	// fetch that ReadMessages makes with it.
	lent, err := fork.fetchWith(ctx, "t", All().LastAnchor(), readOptions{shared: true})
	if err != nil || len(lent) != 3 {
		t.Fatalf("shared read: %d entries (%v), want 3", len(lent), err)
	}
	if reflect.ValueOf(lent[0].Payload).UnsafePointer() != reflect.ValueOf(cached[3].Payload).UnsafePointer() {
		t.Fatal("the default context read copied the cached entries")
	}
	mutate := func(ctx context.Context, entries []Entry, c Context) ([]llm.Message, error) {
		for _, e := range entries {
			e.Payload["content"] = "changed"
		}
		given = entries
		return DefaultSelector(ctx, entries, c)
	}
	msgs, err := New(fork, "t", Context{Select: mutate}).ReadMessages(ctx)
	if err != nil || len(msgs) != 3 || msgs[0].Content.Text != "changed" {
		t.Fatalf("custom selector: %+v (%v)", msgs, err)
	}
	if reflect.ValueOf(given[0].Payload).UnsafePointer() == reflect.ValueOf(cached[3].Payload).UnsafePointer() {
		t.Fatal("a custom selector was given the cached entries")
	}
	msgs, err = New(fork, "t", Context{}).ReadMessages(ctx)
	if err != nil || len(msgs) != 3 || msgs[0].Content.Text != "3" || msgs[2].Content.Text != "5" {
		t.Fatalf("after a custom selector changed its entries the context reads %+v (%v), want 3, 4, 5", msgs, err)
	}
}

// TestContextReadAllocatesLittlePerEntry: a long session's context read
// from the cache (a run's fork, the default selector) allocates a few
// times per read, not per entry: each turn of a session read its whole
// context, and copying each cached entry (its payload and meta maps) made
// a turn's cost grow with the session (about 1,900 allocations for these
// 599 entries, and at 500 turns of history a turn took three times as
// long as a new session's).
func TestContextReadAllocatesLittlePerEntry(t *testing.T) {
	ctx := t.Context()
	s := newFixture(t).store(t)
	const entries = 600
	appendNumbered(t, s, "t", entries, 0)
	tp := New(NewFork(s), "t", Context{})
	if _, err := tp.ReadMessages(ctx); err != nil { // the cache holds the tape
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		msgs, err := tp.ReadMessages(ctx)
		if err != nil || len(msgs) != entries-1 {
			t.Fatalf("%d messages (%v), want %d", len(msgs), err, entries-1)
		}
	})
	if allocs > entries/4 {
		t.Fatalf("a read of %d entries allocated %.0f times, want at most %d", entries-1, allocs, entries/4)
	}
}
