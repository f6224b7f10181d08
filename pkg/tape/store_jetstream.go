package tape

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// This file is the JetStream adapter of the tape store; with
// store_jetstream_direct.go it is the only part of the package that uses
// NATS types.

// JetStreamStore is the production [Store]: every tape is the subject
// names.Tape(tape) of the stream names.TapesStream(), one message per entry
// (a CloudEvent of type [EntryEventType] whose data is the entry's JSON
// line, see [WriteJSONL]; reads also accept the bare JSON line that
// earlier versions stored), and its [Index] is the last message of the
// subject names.TapeIndex(tape) in the same stream (a CloudEvent of type
// [IndexEventType]).
//
// Writes. Append publishes the entries and then the index that commits
// them, which expects its subject's last message to be the index the
// append started from (Nats-Expected-Last-Subject-Sequence, a
// compare-and-set) and rolls the older indexes up. Only the index makes
// entries visible: readers read the range the last index calls committed
// and never beyond it. The first entry expects the tape's subject to end
// with the committed entries, so no other writer can slip an entry into a
// batch or between batches. Every message carries Nats-Msg-Id "<tape
// token>:<entry id or index>:<commit key>:<index revision>", which is also
// its event id. How the batch goes out depends on the stream:
//
//   - On a replicated stream (R3, R5) it is one JetStream atomic batch
//     (ADR-50, nats-server 2.12 and later) of up to 999 entries and the
//     index (a larger append goes out as a checked chain, below): the
//     stream stores all of it or nothing, consecutively, in one
//     replication round. The positions of
//     its entries are known only once it is stored, so its index names
//     them 0, and a reader derives them from the index message's own
//     stream sequence. A batch sent again after its acknowledgement was
//     lost is answered as a duplicate, and the writer knows it was stored.
//   - On one replica, where nats-server stages every atomic batch in a
//     file store of its own (several file operations and an fsync per
//     batch, which would more than double the server's cost of a turn),
//     it is a checked chain: the first entry is published synchronously,
//     the rest pipelined, each expecting both the stream's and the
//     subject's last sequence to be its predecessor's (exact as long as no
//     other subject is written meanwhile, which the store's send lock
//     ensures for the writes of this process, indexes and archives
//     included; after a failed prediction the rest goes one by one), then
//     the index.
//
// Repair. Entries beyond the committed range are orphans of a chain whose
// writer crashed, or is still at work, before its index. The next Append
// adopts orphans that are a prefix of its own commit id ([WithCommitID])
// written from the current index revision, and publishes only the rest.
// Other orphans were never visible: the writer waits for their writer to
// commit (until the index changes, at most the grace of
// [WithOrphanGrace]), then fences the index (publishes it again, so that
// writer's compare-and-set fails) and deletes them. A store serializes
// appends per tape within its process; writers in other processes stay
// correct through the checks above, so the grace only decides liveness.
// What a writer decides after a conflict or a lost acknowledgement it
// reads from the stream leader, with message gets (see leaderGet), never
// from a replica that may lag: where the tape's subject ends, the orphans
// after the committed entries, whether a commit whose acknowledgement got
// lost was stored (see writer.landed), and the index the next attempt
// starts from. An append that meets neither reads only its index, as any
// replica answers it.
//
// Reads cost O(entries read), not O(tape). A LastAnchor query starts at
// the last anchor's stream sequence taken from the index; AfterAnchor and
// BetweenAnchors start at the named anchor when it is among the index's
// [MaxRecentAnchors] newest anchors (an older one costs a scan of the
// whole tape, and a name the index proves absent costs nothing); a query
// without anchors reads the whole tape. The committed entries are read
// with batched direct gets, one request per 1,024 entries, and what those
// do not answer through a short-lived ephemeral consumer filtered on the
// tape subject, started at that sequence and deleted afterwards (on a
// stream without direct gets: up to a few messages with one message get
// each, more through such a consumer). Any replica may answer a direct
// get, and the server places such a consumer, of one replica, on any of
// them. One that lags answers fewer entries than the index calls
// committed, or, when it has not applied the deletes of a fence yet, the
// orphans it deleted, which carry the ids of the entries that replaced
// them: an entry read away from the position the index names for it
// tells (see readCommitted for what this misses). Such a read is read
// again at once from the stream leader, with message gets
// (STREAM.MSG.GET, which only the leader answers), one per entry: a
// replica that lags costs a slower read, not a failure, and what it
// answered is never cached. Index reads (direct gets too) may be stale
// as well: an index older than one the store has already seen is read
// again from the leader. Archives are read through such a consumer, and
// again from the leader when the read stops short of the archive's last
// message; the archive is the messages of its range that carry its key
// (see Archive).
type JetStreamStore struct {
	js     jetstream.JetStream
	names  subjects.Names
	source string // the CloudEvents source of the entries it writes
	stream jetstream.Stream
	// directSubject takes the batched direct gets of committed entries,
	// empty when the stream does not allow direct gets.
	directSubject string
	// msgGetSubject takes the message gets that read from the stream
	// leader (see leaderGet).
	msgGetSubject string
	// seen holds the newest index revision this store has observed per
	// recently observed tape, so that an index read served stale by a
	// lagging replica is detected and retried.
	seen revisions
	// cache holds the committed entries read last of recently read tapes.
	cache *entryCache
	// atomic: appends are atomic batches (a replicated stream; see
	// [JetStreamStore]), else checked chains.
	atomic bool
	grace  time.Duration // see WithOrphanGrace
	// locks serializes writers of one tape within this process, striped by
	// tape name so the set stays bounded.
	locks [64]sync.Mutex
	// sendMu orders what this store publishes: a chain holds it from its
	// first entry until its pipelined ones are sent (see writer.publish),
	// every other message is sent under it (send), so the predicted
	// stream sequences of a chain hold.
	sendMu sync.Mutex
}

var (
	_ Store    = (*JetStreamStore)(nil)
	_ Archiver = (*JetStreamStore)(nil)
)

// JetStreamOption configures [NewJetStreamStore].
type JetStreamOption func(*jsOptions) error

type jsOptions struct {
	replicas   int
	provision  bool
	grace      time.Duration
	cacheBytes int
}

// WithReplicas sets the replica count of the tapes stream when the store
// creates or updates it (default 1).
func WithReplicas(n int) JetStreamOption {
	return func(o *jsOptions) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("tape: replicas must be 1-5, got %d", n)
		}
		o.replicas = n
		return nil
	}
}

// WithOrphanGrace sets how long an append waits for another writer's
// uncommitted entries to be committed before it treats that writer as dead
// and deletes them (default 2s). The wait ends early when the index
// changes. Safety never depends on it: a writer that is merely slow is
// fenced and its commit fails.
func WithOrphanGrace(d time.Duration) JetStreamOption {
	return func(o *jsOptions) error {
		if d < 0 {
			return fmt.Errorf("tape: negative orphan grace %v", d)
		}
		o.grace = d
		return nil
	}
}

// WithEntryCache bounds the store's cache of the committed entries it
// read last per tape, in bytes of the messages decoded (default 8 MiB; 0
// caches nothing): a read that starts inside a tape's cached run takes it
// from there and reads only the entries committed after it, as a
// session's next turn does. Committed entries never change, so a cached
// read returns what a read from the stream would.
func WithEntryCache(bytes int) JetStreamOption {
	return func(o *jsOptions) error {
		if bytes < 0 {
			return fmt.Errorf("tape: negative entry cache size %d", bytes)
		}
		o.cacheBytes = bytes
		return nil
	}
}

// WithoutProvisioning makes the store bind to an existing stream instead
// of creating or updating it (for clients without the permission to manage
// streams).
func WithoutProvisioning() JetStreamOption {
	return func(o *jsOptions) error {
		o.provision = false
		return nil
	}
}

// NewJetStreamStore returns a store on js. Unless [WithoutProvisioning] is
// given it creates or updates, idempotently, the file-backed stream
// names.TapesStream() (see [StreamConfig]) and copies the indexes that
// earlier versions kept in the KV bucket names.TapeIndexBucket(), if it
// exists, to the stream (see [MigrateIndexBucket]). The entries it writes
// name their writer with the source /bub/tape/<name of js's connection>
// (/bub/tape/unnamed when the connection has no name).
func NewJetStreamStore(ctx context.Context, js jetstream.JetStream, names subjects.Names, opts ...JetStreamOption) (*JetStreamStore, error) {
	o := jsOptions{replicas: 1, provision: true, grace: 2 * time.Second, cacheBytes: entryCacheBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &JetStreamStore{js: js, names: names, source: storeSource(js), grace: o.grace, cache: newEntryCache(o.cacheBytes)}
	var err error
	if o.provision {
		sc := StreamConfig(names)
		sc.Replicas = o.replicas
		if s.stream, err = js.CreateOrUpdateStream(ctx, sc); err != nil {
			return nil, fmt.Errorf("creating stream %s: %w", names.TapesStream(), err)
		}
		if _, err := MigrateIndexBucket(ctx, js, names); err != nil {
			return nil, err
		}
	} else if s.stream, err = js.Stream(ctx, names.TapesStream()); err != nil {
		return nil, fmt.Errorf("binding stream %s: %w", names.TapesStream(), err)
	}
	cfg, domain := s.stream.CachedInfo().Config, js.Options().Domain
	if cfg.AllowDirect {
		s.directSubject = names.DirectGet(domain, names.TapesStream())
	}
	s.msgGetSubject = names.MsgGet(domain, names.TapesStream())
	s.atomic = cfg.Replicas > 1 && cfg.AllowAtomicPublish
	return s, nil
}

// StreamConfig is the configuration of the tapes stream of names (one
// replica), which [NewJetStreamStore] creates or updates unless
// [WithoutProvisioning] is given.
func StreamConfig(names subjects.Names) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        names.TapesStream(),
		Description: "Bub tapes: one subject per session, one message per entry; the last message of a tape's index subject commits its entries",
		Subjects:    []string{names.TapesAll(), names.TapeIndexesAll(), names.TapeArchivesAll()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    1,
		// Committed entries are read with batched direct gets; what a
		// replica that lags answers short or wrong the store reads again
		// (see JetStreamStore).
		AllowDirect: true,
		// An append is one atomic batch: its entries and the index that
		// commits them, which rolls up the older indexes of its subject.
		AllowAtomicPublish: true,
		AllowRollup:        true,
	}
}

// storeSource is the CloudEvents source of the entries a store on js
// writes.
func storeSource(js jetstream.JetStream) string {
	if nc := js.Conn(); nc != nil && nc.Opts.Name != "" {
		return "/bub/tape/" + url.PathEscape(nc.Opts.Name)
	}
	return "/bub/tape/unnamed"
}

// structuredContentType is the Content-Type header of every entry
// message, shared by all of them (never modified).
var structuredContentType = []string{"application/cloudevents+json"}

// messageHeader returns the headers of a message of the tapes stream
// whose event id is id: the content type of structured mode, as on every
// Bub event, and the id as its Nats-Msg-Id.
func messageHeader(id string) nats.Header {
	h := make(nats.Header, 4)
	h["Content-Type"] = structuredContentType
	h[subjects.HeaderMsgID] = []string{id}
	return h
}

// Tuning.
const (
	maxAppendAttempts = 8
	maxReadAttempts   = 4
	publishWindow     = 512  // async publishes in flight per window
	fetchChunk        = 1024 // messages per pull request
	smallReadMax      = 8    // reads of at most this many messages use message gets
	// asyncAckTimeout bounds the wait for a window of pipelined
	// publishes' acknowledgements: nats.go's asynchronous publishes have
	// no deadline of their own, and those sent to a stream leader that is
	// lost are never answered (an append waited forever on them).
	asyncAckTimeout = 5 * time.Second
)

// staleReads spaces the reads that met a replica that lags (an older
// index, an entry away from its position, an archive read short of its
// end): 25 ms doubling up to a second.
var staleReads = jsretry.Backoff{First: 25 * time.Millisecond, Max: time.Second}

// errAckLost: a publish was not acknowledged within asyncAckTimeout.
var errAckLost = errors.New("tape: publish not acknowledged in time")

func (s *JetStreamStore) lock(tape string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(tape))
	return &s.locks[h.Sum32()%uint32(len(s.locks))]
}

// Fetch implements [Reader].
func (s *JetStreamStore) Fetch(ctx context.Context, tape string, q Query) ([]Entry, error) {
	return s.fetchWith(ctx, tape, q, readOptions{})
}

// fetchWith implements fetcher: the first attempt starts from o.known
// when it is an index of tape.
func (s *JetStreamStore) fetchWith(ctx context.Context, tape string, q Query, o readOptions) ([]Entry, error) {
	// A read of the entries reads from the stream leader what a replica
	// that lags answers wrong (see readCommitted), so one that fails still
	// met a tape that changed meanwhile (a reset), or an index that a
	// replica that lags answered old: read the index again, from the
	// leader, and the entries, the first time at once (a tape that changed
	// is read whole then), then after a growing pause.
	for attempt := range 2 * maxReadAttempts {
		if attempt > 1 {
			if err := staleReads.Sleep(ctx, attempt-1); err != nil {
				return nil, fmt.Errorf("reading tape %q: %w", tape, err)
			}
		}
		var (
			ix  Index
			err error
		)
		if attempt == 0 && o.known != nil && o.known.Tape == tape {
			ix = *o.known
		} else if ix, err = s.index(ctx, tape, attempt > 0); err != nil {
			return nil, err
		}
		window, err := s.window(ctx, ix, q, o.shared)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading tape %q: %w", tape, err)
		}
		return q.Apply(window)
	}
	return nil, fmt.Errorf("reading tape %q: %w", tape, ErrConflict)
}

// window reads the committed entries q may select: from the anchor the
// query starts at (taken from the index) to the end; shared ones when
// shared.
func (s *JetStreamStore) window(ctx context.Context, ix Index, q Query, shared bool) ([]Entry, error) {
	if ix.Entries == 0 {
		return nil, nil
	}
	start, firstID := ix.FirstSeq, int64(1)
	from := func(name string) bool {
		ref, found, known := ix.findAnchor(name)
		if found {
			start, firstID = ref.Seq, ref.ID
		}
		return found || !known
	}
	switch q.mode() {
	case sliceLast:
		ref, ok := ix.LastAnchor()
		if !ok {
			return nil, nil // Apply reports the missing anchor
		}
		start, firstID = ref.Seq, ref.ID
	case sliceAfter:
		if !from(q.afterAnchor) {
			return nil, nil
		}
	case sliceBetween:
		if !from(q.betweenStart) {
			return nil, nil
		}
	case sliceAll:
		if q.limited && q.text == "" && !q.dates && len(q.kinds) == 0 {
			return s.readCommitted(ctx, ix, start, firstID, min(ix.LastID, int64(q.limit)), shared)
		}
	}
	return s.readCommitted(ctx, ix, start, firstID, ix.LastID-firstID+1, shared)
}

// maxPrealloc bounds the room readCommitted makes before reading.
const maxPrealloc = 4096

// readCommitted reads count committed entries starting at stream sequence
// start, where ix commits the entry with id firstID: those the cache
// holds from there, then the rest from the stream. It checks that the ids
// follow each other, that every entry whose position ix names (knownSeq,
// and start for firstID) is read there and that none is missing;
// otherwise the read met a replica that lags, and it reads them again
// from the stream leader at once (scanLeader), which has stored all that
// ix commits unless the tape changed since: then it returns errRetry,
// caching nothing. Ids alone do not tell: the orphans a writer fenced
// and deleted lie inside the next index's range and carry the ids of the
// entries that replaced them, and a replica that has not applied the
// deletes yet serves them. The positions catch them when the read
// reaches the index's last entry, starts at the tape's first entry or an
// anchor, or meets the first or last entry of a remembered commit; they
// miss a read that ends inside a commit without commit id, such as a
// limited one.
func (s *JetStreamStore) readCommitted(ctx context.Context, ix Index, start uint64, firstID, count int64, shared bool) ([]Entry, error) {
	if count <= 0 {
		return nil, nil
	}
	cached, last := s.cache.get(ix.Tape, start, firstID, count, shared)
	if int64(len(cached)) == count {
		return cached, nil
	}
	from := start
	if len(cached) > 0 {
		from = last + 1
	}
	// count comes from the index, which any client may have written: room
	// is made for what a read holds at most, the rest as entries come.
	read := make([]cachedEntry, 0, min(count-int64(len(cached)), maxPrealloc))
	next := firstID + int64(len(cached))
	add := func(seq uint64, _ string, data []byte) error {
		e, ok := decodeMessage(data)
		if !ok || e.ID != next+int64(len(read)) {
			return errRetry
		}
		want, known := ix.knownSeq(e.ID)
		if e.ID == firstID {
			want, known = start, true
		}
		if known && want != seq {
			return errRetry // a replica serves an entry that is gone
		}
		read = append(read, cachedEntry{seq: seq, entry: e, size: len(data)})
		return nil
	}
	subj, rest := s.names.Tape(ix.Tape), count-int64(len(cached))
	err := s.readReplicas(ctx, subj, from, ix.Seq, int(rest), add)
	if err == nil && int64(len(read)) != rest {
		err = errRetry
	}
	if errors.Is(err, errRetry) {
		read = read[:0]
		err = s.scanLeader(ctx, subj, from, ix.Seq, int(rest), add)
		if err == nil && int64(len(read)) != rest {
			err = errRetry
		}
	}
	if err != nil {
		return nil, err
	}
	return append(cached, s.cache.put(ix.Tape, last, read, shared)...), nil
}

// readReplicas calls fn for the messages of subj with start <= sequence
// <= end, in order, at most limit of them, as any replica of the stream
// answers them: with batched direct gets, and through a consumer for
// what those do not answer.
func (s *JetStreamStore) readReplicas(ctx context.Context, subj string, start, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) error {
	n := 0
	count := func(seq uint64, msgID string, data []byte) error {
		n++
		return fn(seq, msgID, data)
	}
	if s.directSubject != "" {
		var err error
		if start, err = s.readDirect(ctx, subj, start, end, limit, count); err != nil {
			return err
		}
	}
	if left := limit - n; left > 0 {
		return s.scan(ctx, subj, start, end, left, fn)
	}
	return nil
}

// knownSeq returns the stream sequence at which ix puts entry id, when ix
// names it: its last entry's (Seq), entry 1's (FirstSeq), its anchors',
// and the first and last ones of its remembered commits'. Positions it
// does not know (0) are not named. It allocates nothing: it runs for
// every entry a read takes from the stream.
func (ix Index) knownSeq(id int64) (uint64, bool) {
	switch {
	case id == ix.LastID && ix.Seq > 0:
		return ix.Seq, true
	case id == 1 && ix.Entries > 0 && ix.FirstSeq > 0:
		return ix.FirstSeq, true
	}
	for _, a := range ix.RecentAnchors {
		if a.ID == id && a.Seq > 0 {
			return a.Seq, true
		}
	}
	for _, c := range ix.Commits {
		switch {
		case c.Count == 0:
		case c.FirstID == id && c.FirstSeq > 0:
			return c.FirstSeq, true
		case c.FirstID+int64(c.Count)-1 == id && c.LastSeq > 0:
			return c.LastSeq, true
		}
	}
	return 0, false
}

// scan calls fn for each message of subj with start <= sequence <= end, in
// order, and stops after limit messages when limit > 0: through an
// ephemeral consumer that it deletes when done, or, for a few messages of
// a stream without direct gets, from the stream leader with message gets
// (scanLeader). The consumer has one replica, which the server places on
// any of the stream's servers, one that lags too: a caller that needs
// every message up to end checks that it got them and reads again from
// the leader (scanLeader) when not.
//
// On a cluster the consumer is created on one server and the others
// learn of it a moment later, so a fetch through another server can meet
// "no responders"; creating, fetching and message gets retry such
// transient errors for up to [jsretry.ReadBound] (see [jsretry.Read]).
func (s *JetStreamStore) scan(ctx context.Context, subj string, start, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) error {
	if start > end {
		return nil
	}
	if limit > 0 && limit <= smallReadMax && s.directSubject == "" {
		return s.scanLeader(ctx, subj, start, end, limit, fn)
	}
	return s.consume(ctx, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
		FilterSubject: subj,
	}, end, limit, fn)
}

// consume calls fn for each message a short-lived ephemeral consumer of
// cfg delivers now, in order, up to stream sequence end and at most limit
// of them when limit > 0, and deletes the consumer when done.
func (s *JetStreamStore) consume(ctx context.Context, cfg jetstream.ConsumerConfig, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) error {
	cfg.AckPolicy, cfg.MemoryStorage, cfg.Replicas = jetstream.AckNonePolicy, true, 1
	cfg.InactiveThreshold = time.Minute // only if the delete below is lost
	var cons jetstream.Consumer
	err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		cons, err = s.stream.CreateConsumer(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating reader: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.stream.DeleteConsumer(dctx, cons.CachedInfo().Name) // best effort: the inactive threshold cleans up
	}()
	n := 0
	for {
		want := fetchChunk
		if limit > 0 {
			want = min(want, limit-n)
		}
		var msgs []jetstream.Msg
		err := jsretry.Read(ctx, func(context.Context) (err error) {
			msgs, err = fetchNoWait(cons, want)
			return err
		})
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		for _, msg := range msgs {
			md, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("reading: %w", err)
			}
			seq := md.Sequence.Stream
			if seq > end {
				return nil
			}
			if err := fn(seq, msg.Headers().Get(subjects.HeaderMsgID), msg.Data()); err != nil {
				return err
			}
			n++
			if seq == end || limit > 0 && n == limit {
				return nil
			}
		}
		if len(msgs) == 0 {
			return nil
		}
	}
}

// fetchNoWait returns up to want messages cons has now. An error after
// some messages is not transient (the consumer has moved past them), so
// it is returned without its cause's type.
func fetchNoWait(cons jetstream.Consumer, want int) ([]jetstream.Msg, error) {
	batch, err := cons.FetchNoWait(want)
	if err != nil {
		return nil, err
	}
	msgs := make([]jetstream.Msg, 0, want)
	for msg := range batch.Messages() {
		msgs = append(msgs, msg)
	}
	err = batch.Error()
	switch {
	case err == nil || errors.Is(err, jetstream.ErrNoMessages):
		return msgs, nil
	case len(msgs) > 0:
		return nil, fmt.Errorf("after %d messages: %v", len(msgs), err)
	}
	return nil, err
}

// scanLeader is scan from the stream leader, with one message get per
// message (leaderRead): for a few messages of a stream without direct gets
// cheaper than creating, pulling from and deleting a consumer, and how a
// read that met a replica that lags reads again, slower but right.
func (s *JetStreamStore) scanLeader(ctx context.Context, subj string, start, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) error {
	for seq, n := start, 0; (limit <= 0 || n < limit) && seq <= end; n++ {
		m, err := s.leaderRead(ctx, msgGetRequest{Seq: seq, NextFor: subj})
		if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && m.Sequence > end {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if err := fn(m.Sequence, m.Header.Get(subjects.HeaderMsgID), m.Data); err != nil {
			return err
		}
		seq = m.Sequence + 1
	}
	return nil
}

// List implements [Lister]: it reads the last index message of every
// tape through one short-lived consumer.
func (s *JetStreamStore) List(ctx context.Context) ([]string, error) {
	var names []string
	err := s.consume(ctx, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		FilterSubject: s.names.TapeIndexesAll(),
	}, math.MaxUint64, 0, func(seq uint64, _ string, data []byte) error {
		ix, err := decodeIndex("", seq, data)
		if err != nil {
			return err
		}
		if ix.Entries > 0 {
			names = append(names, ix.Tape)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing tapes: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// Index implements [Indexer]: the last message of the tape's index
// subject.
func (s *JetStreamStore) Index(ctx context.Context, tape string) (Index, error) {
	return s.index(ctx, tape, false)
}

// index reads the index of tape with a direct get, which any replica
// answers, or, fromLeader, from the stream leader (leaderGet). A replica
// that lags may answer an older revision than this store has seen, and
// keeps answering the clients of its own server so while it lags (NATS
// hands a request to a queue subscriber on the requester's server
// first): then the index is read from the leader, at once, and again
// after a growing pause while even the leader answers an older one (one
// just elected).
func (s *JetStreamStore) index(ctx context.Context, tape string, fromLeader bool) (Index, error) {
	subj := s.names.TapeIndex(tape)
	for attempt := range 2 * maxReadAttempts {
		if attempt > 1 {
			if err := staleReads.Sleep(ctx, attempt-1); err != nil {
				return Index{}, fmt.Errorf("reading index of tape %q: %w", tape, err)
			}
		}
		ix := Index{Tape: tape}
		var m *jetstream.RawStreamMsg
		err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
			if fromLeader || attempt > 0 {
				m, err = s.leaderGet(ctx, msgGetRequest{LastFor: subj})
			} else {
				m, err = s.stream.GetLastMsgForSubject(ctx, subj)
			}
			return err
		})
		switch {
		case err == nil:
			if ix, err = decodeIndex(tape, m.Sequence, m.Data); err != nil {
				return Index{}, err
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return Index{}, fmt.Errorf("reading index of tape %q: %w", tape, err)
		}
		if s.observe(ix) {
			return ix, nil
		}
	}
	return Index{}, fmt.Errorf("reading index of tape %q: the stream keeps answering an old revision: %w", tape, ErrConflict)
}

// observe records ix's revision and reports whether it is at least the
// newest one this store has seen for the tape.
func (s *JetStreamStore) observe(ix Index) bool { return s.seen.observe(ix.Tape, ix.Revision) }

// revisionsKept bounds a [revisions]: it remembers the tapes observed
// last, at least this many and at most twice as many.
const revisionsKept = 1 << 14

// revisions is the newest revision observed of each recently observed
// tape, in two generations of at most revisionsKept tapes each: once the
// current one is full, it becomes the old one and the one before is
// dropped. A long-running worker or recorder observes every session's
// tape it ever touches; one map of them all grew without bound. A tape
// not observed for that long has no revision to compare with, as after a
// restart. The zero value is empty.
type revisions struct {
	mu       sync.Mutex
	cur, old map[string]uint64
}

// observe records rev for tape and reports whether it is at least the
// newest revision observed of it.
func (r *revisions) observe(tape string, rev uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	newest, ok := r.cur[tape]
	if !ok {
		newest = r.old[tape]
		if len(r.cur) >= revisionsKept {
			r.old, r.cur = r.cur, nil
		}
		if r.cur == nil {
			r.cur = make(map[string]uint64)
		}
	}
	r.cur[tape] = max(rev, newest)
	return rev >= newest
}

// WaitWatermark implements [Indexer] by following the tape's index
// subject (jsretry.Follow): no polling.
func (s *JetStreamStore) WaitWatermark(ctx context.Context, tape, key string, atLeast uint64) (Index, error) {
	ix, err := s.Index(ctx, tape)
	if err != nil || ix.reached(key, atLeast) {
		return ix, err
	}
	nx, err := s.watchIndex(ctx, tape, ix.Revision, func(nx Index) bool { return nx.reached(key, atLeast) })
	if nx.Revision == 0 {
		nx = ix // it read none
	}
	if err != nil {
		return nx, waitError(tape, key, atLeast, nx, err)
	}
	return nx, nil
}

// watchIndex follows the index messages of tape stored after stream
// sequence after until done accepts one, which it returns; when ctx ends
// first it returns the last one it read (the zero index if none) and an
// error wrapping ctx.Err(). It follows with jsretry.Follow, which rides
// out the loss of its consumer's server in about a second, where the
// library's ordered consumer would outlast the caller's wait.
func (s *JetStreamStore) watchIndex(ctx context.Context, tape string, after uint64, done func(Index) bool) (Index, error) {
	type read struct {
		ix  Index
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	reads := make(chan read)
	stop, err := jsretry.Follow(ctx, s.js, s.names.TapesStream(), s.names.TapeIndex(tape), after+1, func(m jetstream.Msg, seq uint64) {
		ix, err := decodeIndex(tape, seq, m.Data())
		select {
		case reads <- read{ix, err}:
		case <-ctx.Done():
		}
	}, nil)
	if err != nil {
		cancel()
		return Index{}, err
	}
	defer func() { cancel(); stop() }()
	var last Index
	for {
		select {
		case r := <-reads:
			if r.err != nil {
				return last, r.err
			}
			last = r.ix
			s.observe(last)
			if done(last) {
				return last, nil
			}
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// Archive implements [Archiver]: it publishes entries to the subject
// names.TapeArchive(tape) and returns "<stream>:<subject>:<first>-<last>"
// (stream sequences; "0-0" for an empty archive). Each message is an
// entry event like a tape's, with the id and Nats-Msg-Id "<tape
// token>:<entry id>:archive:<random key of this call>": other archives of
// the tape written meanwhile (by another recorder, or late by a call that
// failed) may have messages inside the range, and the key tells them
// apart.
func (s *JetStreamStore) Archive(ctx context.Context, tape string, entries []Entry) (string, error) {
	subj := s.names.TapeArchive(tape)
	prefix, suffix := subjects.Token(tape)+":", ":archive:"+rand.Text()
	var first, last uint64
	for i := 0; i < len(entries); i += publishWindow {
		msgs := make([]*nats.Msg, 0, publishWindow)
		for _, e := range entries[i:min(i+publishWindow, len(entries))] {
			n, err := normalize(e)
			if err != nil {
				return "", fmt.Errorf("archiving tape %q: %w", tape, err)
			}
			m := entryMessage{id: prefix + strconv.FormatInt(n.ID, 10) + suffix, source: s.source, session: tape}
			msgs = append(msgs, &nats.Msg{Subject: subj, Data: encodeMessage(m, n), Header: messageHeader(m.id)})
		}
		seqs, err := s.sendWindow(ctx, msgs)
		if err != nil {
			return "", fmt.Errorf("archiving tape %q: %w", tape, err)
		}
		if first == 0 {
			first = seqs[0]
		}
		last = seqs[len(seqs)-1]
	}
	return fmt.Sprintf("%s:%s:%d-%d", s.names.TapesStream(), subj, first, last), nil
}

// ReadArchive implements [Archiver].
func (s *JetStreamStore) ReadArchive(ctx context.Context, location string) ([]Entry, error) {
	bad := fmt.Errorf("reading archive %q: %w", location, ErrBadLocation)
	parts := strings.Split(location, ":")
	if len(parts) != 3 || parts[0] != s.names.TapesStream() ||
		!strings.HasPrefix(parts[1], strings.TrimSuffix(s.names.TapeArchivesAll(), ">")) {
		return nil, bad
	}
	lo, hi, ok := strings.Cut(parts[2], "-")
	first, err1 := strconv.ParseUint(lo, 10, 64)
	last, err2 := strconv.ParseUint(hi, 10, 64)
	if !ok || err1 != nil || err2 != nil || first > last {
		return nil, bad
	}
	if first == 0 {
		return []Entry{}, nil
	}
	// The archive's last message is on its subject: a read that ends
	// before it met a replica that has not stored it yet (a consumer
	// placed on a lagging follower), so it is read again from the stream
	// leader, at once, then after a pause. The messages of the range that
	// are the archive's carry the key of its last one (see Archive); an
	// archive written before message ids has none, and no other key.
	type message struct {
		key  string
		data []byte
	}
	var seen uint64
	for attempt := range 2 * maxReadAttempts {
		if attempt > 1 {
			if err := staleReads.Sleep(ctx, attempt-1); err != nil {
				return nil, fmt.Errorf("reading archive %q: %w", location, err)
			}
		}
		scan := s.scan
		if attempt > 0 {
			scan = s.scanLeader
		}
		var read []message
		seen = 0
		err := scan(ctx, parts[1], first, last, 0, func(seq uint64, msgID string, data []byte) error {
			_, key, _ := strings.Cut(msgID, ":archive:")
			read = append(read, message{key, data})
			seen = seq
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading archive %q: %w", location, err)
		}
		if seen != last {
			continue
		}
		entries, key := []Entry{}, read[len(read)-1].key
		for _, m := range read {
			if m.key != key {
				continue // another archive's
			}
			if e, ok := decodeMessage(m.data); ok {
				entries = append(entries, e)
			}
		}
		return entries, nil
	}
	return nil, fmt.Errorf("reading archive %q: the stream answers up to sequence %d of %d (deleted by its limits, or a replica far behind)", location, seen, last)
}
