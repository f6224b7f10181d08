package tape

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
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
// earlier versions stored), and a per-tape
// [Index] lives in the KV bucket names.TapeIndexBucket() under the key
// subjects.Token(tape).
//
// Writes. Append publishes a batch as a chain in which every message names
// its predecessor with Nats-Expected-Last-Subject-Sequence, so no other
// writer can slip an entry into a batch or between batches. The first
// message bets that the subject ends with the committed entries; the rest
// are pipelined, each also expecting the stream's last sequence to be its
// predecessor's (exact while no other tape is written), and fall back to
// one-by-one publishing when another tape's message gets in between. Every
// message carries Nats-Msg-Id "<tape token>:<entry id>:<commit key>:<index
// revision>", which is also its event id. After the last message is stored the index is
// updated with a compare-and-set on its KV revision, and only that makes
// the batch visible: readers read the range the index calls committed and
// never beyond it.
//
// Repair. Messages beyond the committed range are orphans of a writer that
// crashed, or is still at work, between publishing and committing. The
// next Append adopts orphans that are a prefix of its own commit id
// ([WithCommitID]) written from the current index revision, and publishes
// only the rest. Other orphans were never visible: the writer waits for
// their writer to commit (until the index changes, at most the grace of
// [WithOrphanGrace]), then fences the index (a compare-and-set that makes
// that writer's commit fail) and deletes them. A store serializes appends
// per tape within its process; writers in other processes stay correct
// through the checks above, so the grace only decides liveness.
//
// Reads cost O(entries read), not O(tape). A LastAnchor query starts at
// the last anchor's stream sequence taken from the index; AfterAnchor and
// BetweenAnchors start at the named anchor when it is among the index's
// [MaxRecentAnchors] newest anchors (an older one costs a scan of the
// whole tape, and a name the index proves absent costs nothing); a query
// without anchors reads the whole tape. The committed entries are read
// with batched direct gets, one request per 1,024 entries. Any replica may
// answer those, and a lagging one answers fewer entries than the index
// calls committed: the rest is read from the stream leader through a
// short-lived ephemeral consumer filtered on the tape subject, started at
// that sequence and deleted afterwards. A stream without direct gets is
// read from the leader only: up to a few messages with one message get
// each, more through such a consumer. KV reads of the index may be stale too, so the store retries an
// index older than one it has already seen. Uncommitted messages (orphans,
// archives) are always read from the leader.
type JetStreamStore struct {
	js     jetstream.JetStream
	names  subjects.Names
	source string // the CloudEvents source of the entries it writes
	stream jetstream.Stream
	// directSubject takes the batched direct gets of committed entries,
	// empty when the stream does not allow direct gets.
	directSubject string
	kv            jetstream.KeyValue
	grace         time.Duration // see WithOrphanGrace
	// seen holds the newest index revision this store has observed per
	// tape, so that an index read served stale by a lagging replica (KV
	// gets may be answered by any replica) is detected and retried.
	seenMu sync.Mutex
	seen   map[string]uint64
	// cache holds the committed entries read last of recently read tapes.
	cache *entryCache
	// locks serializes writers of one tape within this process, striped by
	// tape name so the set stays bounded.
	locks [64]sync.Mutex
	// sendMu orders the sends of pipelined appends of all tapes of this
	// store (see writer.publish): their predicted stream sequences hold
	// only while nothing else is published to the stream in between.
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

// WithReplicas sets the replica count of the tapes stream and the index
// bucket when the store creates or updates them (default 1).
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

// WithoutProvisioning makes the store bind to an existing stream and bucket
// instead of creating or updating them (for clients without the permission
// to manage streams).
func WithoutProvisioning() JetStreamOption {
	return func(o *jsOptions) error {
		o.provision = false
		return nil
	}
}

// NewJetStreamStore returns a store on js. Unless [WithoutProvisioning] is
// given it creates or updates, idempotently, the file-backed stream
// names.TapesStream() (subjects names.TapesAll() and names.TapeArchivesAll())
// and the KV bucket names.TapeIndexBucket(). The entries it writes name
// their writer with the source /bub/tape/<name of js's connection>
// (/bub/tape/unnamed when the connection has no name).
func NewJetStreamStore(ctx context.Context, js jetstream.JetStream, names subjects.Names, opts ...JetStreamOption) (*JetStreamStore, error) {
	o := jsOptions{replicas: 1, provision: true, grace: 2 * time.Second, cacheBytes: entryCacheBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &JetStreamStore{js: js, names: names, source: storeSource(js), grace: o.grace, seen: map[string]uint64{}, cache: newEntryCache(o.cacheBytes)}
	var err error
	if o.provision {
		sc := StreamConfig(names)
		sc.Replicas = o.replicas
		s.stream, err = js.CreateOrUpdateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("creating stream %s: %w", names.TapesStream(), err)
		}
		kc := IndexBucketConfig(names)
		kc.Replicas = o.replicas
		s.kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
		if err != nil {
			return nil, fmt.Errorf("creating bucket %s: %w", names.TapeIndexBucket(), err)
		}
	} else {
		if s.stream, err = js.Stream(ctx, names.TapesStream()); err != nil {
			return nil, fmt.Errorf("binding stream %s: %w", names.TapesStream(), err)
		}
		if s.kv, err = js.KeyValue(ctx, names.TapeIndexBucket()); err != nil {
			return nil, fmt.Errorf("binding bucket %s: %w", names.TapeIndexBucket(), err)
		}
	}
	if s.stream.CachedInfo().Config.AllowDirect {
		s.directSubject = names.DirectGet(js.Options().Domain, names.TapesStream())
	}
	return s, nil
}

// StreamConfig is the configuration of the tapes stream of names (one
// replica), which [NewJetStreamStore] creates or updates unless
// [WithoutProvisioning] is given.
func StreamConfig(names subjects.Names) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        names.TapesStream(),
		Description: "Bub tapes: one subject per session, one message per entry",
		Subjects:    []string{names.TapesAll(), names.TapeArchivesAll()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    1,
		// Committed entries are read with batched direct gets; a replica
		// that serves them stale answers fewer than the index commits, and
		// the store reads the rest from the leader.
		AllowDirect: true,
	}
}

// IndexBucketConfig is the configuration of the tape index bucket of
// names (one replica), see [StreamConfig].
func IndexBucketConfig(names subjects.Names) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      names.TapeIndexBucket(),
		Description: "Bub tape index: committed range, anchors, commits, watermarks",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    1,
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

// messageHeader returns the headers of an entry message before the publish
// options add the Nats-Msg-Id: the content type of structured mode, as on
// every Bub event.
func messageHeader() nats.Header {
	h := make(nats.Header, 4)
	h["Content-Type"] = structuredContentType
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

// errRetry makes Append or Fetch start over from a fresh index; errWait
// does the same after waiting for another writer, without counting as a
// failed attempt.
var (
	errRetry = errors.New("tape: retry")
	errWait  = errors.New("tape: waited for another writer")
	errTail  = errors.New("tape: unexpected last entry")
	// errAckLost: a publish was not acknowledged within asyncAckTimeout.
	errAckLost = errors.New("tape: publish not acknowledged in time")
)

func (s *JetStreamStore) lock(tape string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(tape))
	return &s.locks[h.Sum32()%uint32(len(s.locks))]
}

// Fetch implements [Reader].
func (s *JetStreamStore) Fetch(ctx context.Context, tape string, q Query) ([]Entry, error) {
	for range maxReadAttempts {
		ix, err := s.Index(ctx, tape)
		if err != nil {
			return nil, err
		}
		window, err := s.window(ctx, ix, q)
		if errors.Is(err, errRetry) {
			continue // the tape changed while we read it
		}
		if err != nil {
			return nil, fmt.Errorf("reading tape %q: %w", tape, err)
		}
		return q.Apply(window)
	}
	return nil, fmt.Errorf("reading tape %q: %w", tape, ErrConflict)
}

// window reads the committed entries q may select: from the anchor the
// query starts at (taken from the index) to the end.
func (s *JetStreamStore) window(ctx context.Context, ix Index, q Query) ([]Entry, error) {
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
			return s.readCommitted(ctx, ix, start, firstID, min(ix.LastID, int64(q.limit)))
		}
	}
	return s.readCommitted(ctx, ix, start, firstID, ix.LastID-firstID+1)
}

// readCommitted reads count committed entries starting at stream sequence
// start with entry id firstID, checking that the ids follow each other:
// those the cache holds from there, then the rest from the stream.
func (s *JetStreamStore) readCommitted(ctx context.Context, ix Index, start uint64, firstID, count int64) ([]Entry, error) {
	if count <= 0 {
		return nil, nil
	}
	cached, last := s.cache.get(ix.Tape, start, firstID, count)
	if int64(len(cached)) == count {
		return cached, nil
	}
	from := start
	if len(cached) > 0 {
		from = last + 1
	}
	read := make([]cachedEntry, 0, count-int64(len(cached)))
	next := firstID + int64(len(cached))
	add := func(seq uint64, _ string, data []byte) error {
		e, ok := decodeMessage(data)
		if !ok || e.ID != next+int64(len(read)) {
			return errRetry
		}
		read = append(read, cachedEntry{seq: seq, entry: e, size: len(data)})
		return nil
	}
	subj, rest := s.names.Tape(ix.Tape), count-int64(len(cached))
	if s.directSubject != "" {
		var err error
		if from, err = s.readDirect(ctx, subj, from, ix.Seq, int(rest), add); err != nil {
			return nil, err
		}
	}
	if left := rest - int64(len(read)); left > 0 {
		if err := s.scan(ctx, subj, from, ix.Seq, int(left), add); err != nil {
			return nil, err
		}
	}
	if int64(len(read)) != rest {
		return nil, errRetry
	}
	return append(cached, s.cache.put(ix.Tape, last, read)...), nil
}

// scan calls fn for each message of subj with start <= sequence <= end, in
// order, and stops after limit messages when limit > 0, reading from the
// stream leader: through an ephemeral consumer that it deletes when done,
// or, for a few messages of a stream without direct gets, with message
// gets.
//
// On a cluster the consumer is created on the stream leader and the other
// servers learn of it a moment later, so a fetch through another server
// can meet "no responders"; creating, fetching and message gets retry
// such transient errors for up to [jsretry.ReadBound] (see [jsretry.Read]).
func (s *JetStreamStore) scan(ctx context.Context, subj string, start, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) error {
	if start > end {
		return nil
	}
	if limit > 0 && limit <= smallReadMax && s.directSubject == "" {
		// (nats.go sends message gets as direct gets when the stream
		// allows them, which any replica answers: scan reads the leader)
		return s.scanByGets(ctx, subj, start, end, limit, fn)
	}
	var cons jetstream.Consumer
	err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		cons, err = s.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       start,
			FilterSubject:     subj,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			Replicas:          1,
			InactiveThreshold: time.Minute, // only if the delete below is lost
		})
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

// scanByGets is scan for a few messages: one message get per message is
// cheaper than creating, pulling from and deleting a consumer.
func (s *JetStreamStore) scanByGets(ctx context.Context, subj string, start, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) error {
	for seq, n := start, 0; n < limit && seq <= end; n++ {
		var m *jetstream.RawStreamMsg
		err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
			m, err = s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
			return err
		})
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

// Append implements [Appender].
func (s *JetStreamStore) Append(ctx context.Context, tape string, entries []Entry, opts ...AppendOption) ([]Entry, error) {
	o, err := resolveAppendOptions(opts)
	if err != nil {
		return nil, err
	}
	w := s.newWriter(tape, entries, o)
	mu := s.lock(tape)
	mu.Lock()
	defer mu.Unlock()
	for attempts := 0; attempts < maxAppendAttempts; {
		stored, err := w.attempt(ctx)
		if errors.Is(err, errWait) {
			continue
		}
		if errors.Is(err, errRetry) {
			attempts++
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("appending to tape %q: %w", tape, err)
		}
		return stored, nil
	}
	return nil, fmt.Errorf("appending to tape %q: %w", tape, ErrConflict)
}

// writer is one Append call.
type writer struct {
	s         *JetStreamStore
	tape      string
	subj      string
	entries   []Entry
	o         appendOptions
	commitKey string
	rev       uint64 // index revision the current attempt started from
	// The newest foreign orphan seen and when it was first seen.
	orphanTail   uint64
	orphanSeenAt time.Time
}

func (s *JetStreamStore) newWriter(tape string, entries []Entry, o appendOptions) *writer {
	w := &writer{s: s, tape: tape, subj: s.names.Tape(tape), entries: entries, o: o}
	if o.commitID != "" {
		sum := sha256.Sum256([]byte(o.commitID))
		w.commitKey = hex.EncodeToString(sum[:16])
	} else {
		w.commitKey = "~" + rand.Text() // anonymous: never adopted by another call
	}
	return w
}

// msgID names entry id of this commit written from index revision w.rev:
// "<tape token>:<entry id>:<commit key>:<rev>", the message's Nats-Msg-Id
// and event id. The entry id alone repeats after a reset; the commit key
// tells the writers of one revision apart, and the revision makes ids
// fresh after a fence, so entries published again after their orphans were
// deleted are not mistaken for duplicates of them.
func (w *writer) msgID(id int64) string {
	return subjects.Token(w.tape) + ":" + strconv.FormatInt(id, 10) + ":" + w.commitKey + ":" + strconv.FormatUint(w.rev, 10)
}

// attempt runs one optimistic append; errRetry means start over.
func (w *writer) attempt(ctx context.Context) ([]Entry, error) {
	s := w.s
	ix, err := w.index(ctx)
	if err != nil {
		return nil, err
	}
	w.rev = ix.Revision
	if w.o.commitID != "" {
		if c, ok := ix.Commit(w.o.commitID); ok {
			return s.readCommitted(ctx, Index{Tape: w.tape, Seq: c.LastSeq}, c.FirstSeq, c.FirstID, int64(c.Count))
		}
	}
	first := ix.LastID + 1
	if w.o.reset {
		first = 1
	}
	stored, err := numberEntries(w.entries, first)
	if err != nil {
		return nil, err
	}
	seqs, err := w.write(ctx, ix, stored)
	if err != nil {
		return nil, err
	}
	nx := ix.next(stored, seqs, w.o)
	if err := s.putIndex(ctx, nx, ix.Revision); err != nil {
		return nil, err
	}
	// Drop what a reset left behind. Best effort: the entries are already
	// committed, and leftovers below FirstSeq are never read.
	if (w.o.reset || ix.Entries == 0) && ix.Seq > 0 {
		below := nx.Seq + 1
		if nx.Entries > 0 {
			below = nx.FirstSeq
		}
		_ = s.stream.Purge(ctx, jetstream.WithPurgeSubject(w.subj), jetstream.WithPurgeSequence(below))
	}
	return stored, nil
}

// index returns the index an attempt starts from: the caller's (see
// WithIndex) the first time, a fresh read after that.
func (w *writer) index(ctx context.Context) (Index, error) {
	if ix := w.o.index; ix != nil && ix.Tape == w.tape {
		w.o.index = nil
		return *ix, nil
	}
	return w.s.Index(ctx, w.tape)
}

// write publishes stored after the committed entries of ix and returns
// their stream sequences. It first bets that the subject ends with the
// committed entries (or is empty after a reset); when the first message
// finds another tail it looks at the subject's real last message and
// repairs orphans before trying again.
func (w *writer) write(ctx context.Context, ix Index, stored []Entry) ([]uint64, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	tail := ix.Seq
	if ix.Entries == 0 {
		tail = 0 // a new tape, or a reset one whose leftovers were purged
	}
	seqs, err := w.publish(ctx, stored, 0, len(stored), tail)
	if !errors.Is(err, errTail) {
		return seqs, err
	}
	if tail, err = w.s.lastSeq(ctx, w.subj); err != nil {
		return nil, err
	}
	if tail > ix.Seq {
		if seqs, err = w.repair(ctx, ix, tail, stored); err != nil {
			return nil, err
		}
	}
	more, err := w.publish(ctx, stored, len(seqs), len(stored), tail)
	if errors.Is(err, errTail) {
		return nil, errRetry // another writer got there first
	}
	return append(seqs, more...), err
}

// repair handles the orphans in (ix.Seq, last]. When they are a prefix of
// this very commit written from the current index revision it adopts them: their stored entries replace the first
// ones of stored and their sequences are returned. Otherwise another writer
// is at work or died: while the orphans are younger than the grace period
// (measured from when this call first saw the newest of them, so no clocks
// are compared) it waits for the index to change and returns errWait; then
// it fences the index, deletes them and returns errRetry.
func (w *writer) repair(ctx context.Context, ix Index, last uint64, stored []Entry) ([]uint64, error) {
	type orphan struct {
		seq   uint64
		msgID string
		entry Entry
		ok    bool
	}
	var orphans []orphan
	err := w.s.scan(ctx, w.subj, ix.Seq+1, last, 0, func(seq uint64, msgID string, data []byte) error {
		e, ok := decodeMessage(data)
		orphans = append(orphans, orphan{seq, msgID, e, ok})
		return nil
	})
	if err != nil {
		return nil, err
	}
	adopt := len(orphans) <= len(stored)
	for i, o := range orphans {
		adopt = adopt && o.ok && o.msgID == w.msgID(stored[i].ID) && o.entry.ID == stored[i].ID
	}
	if adopt {
		seqs := make([]uint64, len(orphans))
		for i, o := range orphans {
			stored[i], seqs[i] = o.entry, o.seq
		}
		return seqs, nil
	}
	if w.orphanTail != last {
		w.orphanTail, w.orphanSeenAt = last, time.Now()
	}
	if wait := w.s.grace - time.Since(w.orphanSeenAt); wait > 0 {
		if err := w.s.waitIndexChange(ctx, ix, wait); err != nil {
			return nil, err
		}
		return nil, errWait
	}
	// Fence first: a live writer of these orphans can no longer commit them.
	if err := w.s.putIndex(ctx, ix, ix.Revision); err != nil {
		return nil, err
	}
	for _, o := range orphans {
		if err := w.s.stream.DeleteMsg(ctx, o.seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("deleting uncommitted entry at sequence %d: %w", o.seq, err)
		}
	}
	return nil, errRetry
}

// publish stores batch[from:to] after the subject's message prev, as a
// checked chain, and returns their stream sequences. errTail means the
// subject did not end at prev, so nothing was stored. The first message is published synchronously; the following
// ones are pipelined, each expecting both the stream's and the subject's
// last sequence to be its predecessor's (exact as long as no other subject
// is written meanwhile, which the store's send lock ensures for the writes
// of this process); after the first failed prediction the rest goes one by
// one, each expecting its predecessor's real sequence.
func (w *writer) publish(ctx context.Context, batch []Entry, from, to int, prev uint64) ([]uint64, error) {
	entries := batch[from:to]
	seqs := make([]uint64, 0, len(entries))
	msg := func(i int) (*nats.Msg, string) {
		id := w.msgID(entries[i].ID)
		m := entryMessage{id: id, source: w.s.source, session: w.tape}
		return &nats.Msg{Subject: w.subj, Data: appendMessage(nil, m, entries[i]), Header: messageHeader()}, id
	}
	publishOne := func(i int) error {
		m, id := msg(i)
		// Transient errors (the stream electing a leader) are retried
		// with the same message id: an attempt that was stored although
		// its answer got lost answers the next one as a duplicate. So
		// does an entry an earlier call of this commit stored from this
		// index revision before it died (a replicated stream's leader
		// checks the duplicate window before the expected sequence): the
		// id names the commit and the revision, so the entry is this
		// commit's own and is adopted where it is, as repair adopts
		// such orphans; the index's compare-and-set settles two live
		// writers of one commit.
		var ack *jetstream.PubAck
		err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
			ack, err = w.s.js.PublishMsg(ctx, m,
				jetstream.WithMsgID(id),
				jetstream.WithExpectLastSequencePerSubject(prev))
			return err
		})
		if isWrongLastSeq(err) && i == 0 {
			return errTail
		}
		if err != nil {
			return publishError(err)
		}
		prev = ack.Sequence
		seqs = append(seqs, prev)
		return nil
	}
	if len(entries) == 0 {
		return nil, nil
	}
	// The predictions below fail whenever another tape of this store is
	// written between the first publish and the pipelined ones (the
	// recorder appends to many tapes at once): hold the store's send lock
	// from the first publish until the first window is sent. One
	// connection keeps the order of what it sends.
	unlock := func() {}
	if len(entries) > 1 {
		w.s.sendMu.Lock()
		var once sync.Once
		unlock = func() { once.Do(w.s.sendMu.Unlock) }
		defer unlock()
	}
	if err := publishOne(0); err != nil {
		return nil, err
	}
	i := 1
	for pipelined := true; i < len(entries) && pipelined; {
		end := min(i+publishWindow, len(entries))
		futures := make([]jetstream.PubAckFuture, 0, end-i)
		for j := i; j < end; j++ {
			expect := prev + uint64(j-i)
			m, id := msg(j)
			f, err := w.s.js.PublishMsgAsync(m,
				jetstream.WithMsgID(id),
				jetstream.WithExpectLastSequence(expect),
				jetstream.WithExpectLastSequencePerSubject(expect))
			if err != nil {
				return nil, fmt.Errorf("publishing: %w", err)
			}
			futures = append(futures, f)
		}
		unlock()
		failed := false
		lost := time.NewTimer(asyncAckTimeout)
		defer lost.Stop()
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if failed {
					return nil, errRetry // a success after a gap: someone else writes this tape
				}
				// A duplicate is this commit's own entry (see publishOne).
				prev = ack.Sequence
				seqs = append(seqs, prev)
				i++
			case err := <-f.Err():
				if !isWrongLastSeq(err) {
					return nil, fmt.Errorf("publishing: %w", err)
				}
				failed, pipelined = true, false
			case <-lost.C:
				// The acknowledgements went with the stream's leader:
				// start over from a fresh index; what was stored is this
				// commit's own and is adopted (see repair).
				return nil, errRetry
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	for ; i < len(entries); i++ {
		if err := publishOne(i); err != nil {
			return nil, err
		}
	}
	return seqs, nil
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// publishError maps a failed checked publish: a wrong last sequence means
// another writer got there first.
func publishError(err error) error {
	if isWrongLastSeq(err) {
		return errRetry
	}
	return fmt.Errorf("publishing: %w", err)
}

// lastSeq returns the stream sequence of the last message of subj, 0 when
// it has none.
func (s *JetStreamStore) lastSeq(ctx context.Context, subj string) (uint64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading last entry: %w", err)
	}
	return m.Sequence, nil
}

// Reset implements [Resetter].
func (s *JetStreamStore) Reset(ctx context.Context, tape string) error {
	_, err := s.Append(ctx, tape, nil, WithReset())
	return err
}

// List implements [Lister]. It reads every index in one KV watch.
func (s *JetStreamStore) List(ctx context.Context) ([]string, error) {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("listing tapes: %w", err)
	}
	defer w.Stop()
	var names []string
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("listing tapes: watcher closed")
			}
			if e == nil {
				slices.Sort(names)
				return names, nil
			}
			var ix Index
			if err := json.Unmarshal(e.Value(), &ix); err != nil {
				return nil, fmt.Errorf("listing tapes: decoding index %s: %w", e.Key(), err)
			}
			if ix.Entries > 0 {
				names = append(names, ix.Tape)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("listing tapes: %w", ctx.Err())
		}
	}
}

// Index implements [Indexer].
func (s *JetStreamStore) Index(ctx context.Context, tape string) (Index, error) {
	// A replica that lags (just after a leader change) may answer an
	// older revision for a while: ask again after a growing pause.
	pause := 25 * time.Millisecond
	for attempt := range 2 * maxReadAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return Index{}, fmt.Errorf("reading index of tape %q: %w", tape, ctx.Err())
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
		ix := Index{Tape: tape}
		var e jetstream.KeyValueEntry
		err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
			e, err = s.kv.Get(ctx, subjects.Token(tape))
			return err
		})
		switch {
		case err == nil:
			if ix, err = decodeIndex(tape, e); err != nil {
				return Index{}, err
			}
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return Index{}, fmt.Errorf("reading index of tape %q: %w", tape, err)
		}
		if s.observe(ix) {
			return ix, nil
		}
	}
	return Index{}, fmt.Errorf("reading index of tape %q: replicas keep answering an old revision: %w", tape, ErrConflict)
}

// observe records ix's revision and reports whether it is at least the
// newest one this store has seen for the tape.
func (s *JetStreamStore) observe(ix Index) bool {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if ix.Revision < s.seen[ix.Tape] {
		return false
	}
	s.seen[ix.Tape] = ix.Revision
	return true
}

func decodeIndex(tape string, e jetstream.KeyValueEntry) (Index, error) {
	ix := Index{Tape: tape, Revision: e.Revision()}
	if e.Operation() != jetstream.KeyValuePut {
		return ix, nil
	}
	if err := json.Unmarshal(e.Value(), &ix); err != nil {
		return Index{}, fmt.Errorf("decoding index of tape %q: %w", tape, err)
	}
	ix.Tape, ix.Revision = tape, e.Revision()
	return ix, nil
}

// putIndex stores ix if the index is still at revision rev (0: absent).
// A lost compare-and-set returns errRetry.
func (s *JetStreamStore) putIndex(ctx context.Context, ix Index, rev uint64) error {
	b, err := json.Marshal(ix)
	if err != nil {
		return fmt.Errorf("encoding index: %w", err)
	}
	key := subjects.Token(ix.Tape)
	// Transient errors (the bucket electing a leader) are retried; when a
	// lost answer hid a stored attempt, the next one meets the new
	// revision and reports a conflict, which the caller resolves by
	// reading the index again.
	want := rev
	err = jsretry.Read(ctx, func(ctx context.Context) (err error) {
		if want == 0 {
			rev, err = s.kv.Create(ctx, key, b)
		} else {
			rev, err = s.kv.Update(ctx, key, b, want)
		}
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return errRetry
	}
	if err != nil {
		return fmt.Errorf("writing index: %w", err)
	}
	ix.Revision = rev
	s.observe(ix)
	return nil
}

// waitIndexChange returns when the index of ix.Tape has a revision other
// than ix.Revision, or after d.
func (s *JetStreamStore) waitIndexChange(ctx context.Context, ix Index, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	w, err := s.kv.Watch(ctx, subjects.Token(ix.Tape))
	if err != nil {
		return fmt.Errorf("watching index: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e != nil && e.Revision() != ix.Revision {
				return nil
			}
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitWatermark implements [Indexer] with a KV watcher on the tape's index
// key: no polling.
func (s *JetStreamStore) WaitWatermark(ctx context.Context, tape, key string, atLeast uint64) (Index, error) {
	ix, err := s.Index(ctx, tape)
	if err != nil || ix.reached(key, atLeast) {
		return ix, err
	}
	var w jetstream.KeyWatcher
	// Retried through a connection moving or an election. The watcher
	// lives as long as the context it is created with, so each attempt
	// gets ctx itself rather than Read's shorter per-attempt one.
	err = jsretry.Read(ctx, func(context.Context) (err error) {
		w, err = s.kv.Watch(ctx, subjects.Token(tape))
		return err
	})
	if err != nil {
		return ix, waitError(tape, key, atLeast, ix, err)
	}
	defer w.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return ix, waitError(tape, key, atLeast, ix, errors.New("watcher closed"))
			}
			if e == nil {
				continue // end of the initial values
			}
			if ix, err = decodeIndex(tape, e); err != nil {
				return ix, err
			}
			s.observe(ix)
			if ix.reached(key, atLeast) {
				return ix, nil
			}
		case <-ctx.Done():
			return ix, waitError(tape, key, atLeast, ix, ctx.Err())
		}
	}
}

// Archive implements [Archiver]: it publishes entries to the subject
// names.TapeArchive(tape) and returns "<stream>:<subject>:<first>-<last>"
// (stream sequences; "0-0" for an empty archive). Each message is an
// entry event like a tape's, with the id and Nats-Msg-Id "<tape
// token>:<entry id>:archive:<random key of this call>".
func (s *JetStreamStore) Archive(ctx context.Context, tape string, entries []Entry) (string, error) {
	subj := s.names.TapeArchive(tape)
	prefix, suffix := subjects.Token(tape)+":", ":archive:"+rand.Text()
	var first, last uint64
	for i := 0; i < len(entries); i += publishWindow {
		batch := entries[i:min(i+publishWindow, len(entries))]
		futures := make([]jetstream.PubAckFuture, len(batch))
		for j, e := range batch {
			n, err := normalize(e)
			if err != nil {
				return "", fmt.Errorf("archiving tape %q: %w", tape, err)
			}
			m := entryMessage{id: prefix + strconv.FormatInt(n.ID, 10) + suffix, source: s.source, session: tape}
			msg := &nats.Msg{Subject: subj, Data: appendMessage(nil, m, n), Header: messageHeader()}
			if futures[j], err = s.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.id)); err != nil {
				return "", fmt.Errorf("archiving tape %q: %w", tape, err)
			}
		}
		lost := time.NewTimer(asyncAckTimeout)
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if first == 0 {
					first = ack.Sequence
				}
				last = ack.Sequence
			case err := <-f.Err():
				return "", fmt.Errorf("archiving tape %q: %w", tape, err)
			case <-lost.C:
				return "", fmt.Errorf("archiving tape %q: %w", tape, errAckLost)
			case <-ctx.Done():
				return "", fmt.Errorf("archiving tape %q: %w", tape, ctx.Err())
			}
		}
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
	var entries []Entry
	if first == 0 {
		return entries, nil
	}
	err := s.scan(ctx, parts[1], first, last, 0, func(_ uint64, _ string, data []byte) error {
		if e, ok := decodeMessage(data); ok {
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading archive %q: %w", location, err)
	}
	return entries, nil
}
