package tape

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// This file is the writing half of the JetStream adapter (see
// [JetStreamStore] for the design).

// maxBatchEntries is the most entries an append sends as one atomic
// batch: nats-server's default limit of a batch is 1,000 messages, the
// entries and the index. A larger append goes out as a checked chain.
const maxBatchEntries = 999

// Errors of one append attempt: errRetry makes Append start over from a
// fresh index; errWait does the same after waiting for another writer,
// without counting as a failed attempt; errTail means the tape's subject
// did not end where the index said, so nothing was stored.
var (
	errRetry = errors.New("tape: retry")
	errWait  = errors.New("tape: waited for another writer")
	errTail  = errors.New("tape: unexpected last entry")
)

// errCodeBatchDuplicate is nats-server's error of an atomic batch holding
// a message with the id of a stored one (its errors.json). A batch
// dropped half-way is retried as transient (jsretry).
const errCodeBatchDuplicate = 10201

// conflictBackoff spaces the attempts of an append that lost the tape's
// compare-and-set to another writer.
var conflictBackoff = jsretry.Backoff{First: time.Millisecond, Max: 128 * time.Millisecond}

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
			// Another writer committed first: let it get ahead, more so
			// each time, so that writers of one tape do not keep taking
			// each other's turn.
			if attempts++; attempts == maxAppendAttempts {
				break
			}
			if err := conflictBackoff.Sleep(ctx, attempts); err != nil {
				return nil, fmt.Errorf("appending to tape %q: %w", tape, err)
			}
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
	tried     bool   // an attempt read its index already
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

// msgID names the message of entry id (or of the index, "index") of this
// commit written from index revision w.rev: "<tape token>:<entry
// id>:<commit key>:<rev>", the message's Nats-Msg-Id and event id. The
// entry id alone repeats after a reset; the commit key tells the writers
// of one revision apart, and the revision makes ids fresh after a fence,
// so entries published again after their orphans were deleted are not
// mistaken for duplicates of them.
func (w *writer) msgID(id string) string {
	return subjects.Token(w.tape) + ":" + id + ":" + w.commitKey + ":" + strconv.FormatUint(w.rev, 10)
}

func (w *writer) entryID(e Entry) string { return w.msgID(strconv.FormatInt(e.ID, 10)) }

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
			return s.readCommitted(ctx, Index{Tape: w.tape, Seq: c.LastSeq, LastID: c.FirstID + int64(c.Count) - 1}, c.FirstSeq, c.FirstID, int64(c.Count), false)
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
	nx, err := w.write(ctx, ix, stored)
	if err != nil || nx.Revision == 0 {
		return stored, err // no revision: stored by an attempt whose answer was lost
	}
	s.observe(nx)
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
// WithIndex) the first time, a fresh read after that, which an attempt
// after one that did not commit reads from the stream leader: a replica
// that lags may keep answering the index the failed one started from.
func (w *writer) index(ctx context.Context) (Index, error) {
	again := w.tried
	w.tried = true
	if ix := w.o.index; ix != nil && ix.Tape == w.tape {
		w.o.index = nil
		return *ix, nil
	}
	return w.s.index(ctx, w.tape, again)
}

// write stores stored after the committed entries of ix and then the
// index after them, and returns that index. It first bets that the
// subject ends with the committed entries (or is empty after a reset);
// when it finds another tail it repairs the orphans there (adopting those
// of this very commit) and tries once more.
func (w *writer) write(ctx context.Context, ix Index, stored []Entry) (Index, error) {
	tail := ix.Seq
	if ix.Entries == 0 {
		tail = 0 // a new tape, or a reset one whose leftovers were purged
	}
	var adopted []uint64
	for repaired := false; ; repaired = true {
		var nx Index
		var err error
		if w.s.atomic && len(stored)-len(adopted) <= maxBatchEntries {
			nx, err = w.sendBatch(ctx, ix, stored, adopted, tail)
		} else {
			nx, err = w.sendChain(ctx, ix, stored, adopted, tail)
		}
		if !errors.Is(err, errTail) {
			return nx, err
		}
		if repaired {
			return Index{}, errRetry // another writer got there first
		}
		if tail, err = w.s.lastSeq(ctx, w.subj); err != nil {
			return Index{}, err
		}
		if tail > ix.Seq {
			if adopted, err = w.repair(ctx, ix, tail, stored); err != nil {
				return Index{}, err
			}
		}
	}
}

// sendChain publishes stored[len(adopted):] after the subject's message
// tail as a checked chain (see publish) and then the index after all of
// stored, which expects the tape's index to be still at revision w.rev.
func (w *writer) sendChain(ctx context.Context, ix Index, stored []Entry, adopted []uint64, tail uint64) (Index, error) {
	seqs, err := w.publish(ctx, stored[len(adopted):], tail)
	if err != nil {
		return Index{}, err
	}
	positions := append(adopted, seqs...)
	nx := ix.next(stored, positions, w.o)
	if nx.Revision, err = w.s.putIndex(ctx, nx, w.rev, w.msgID("index")); err != nil {
		// The index lost its compare-and-set: another writer fenced this
		// commit, or an attempt of the index was stored although its
		// answer got lost and another writer committed after it before
		// the retry (see landed).
		if errors.Is(err, errRetry) && len(stored) > 0 {
			if ok, lerr := w.landed(ctx, positions[0], positions[len(positions)-1], stored); lerr != nil || ok {
				return Index{}, lerr
			}
		}
		return Index{}, err
	}
	return nx, nil
}

// sendBatch publishes stored[len(adopted):] and then the index after all
// of stored as one atomic batch: the first entry expects the subject's
// last message to be tail, the index that the tape's index is still at
// revision w.rev. The positions of the batch's entries are known only
// once it is stored, so the index names them 0 (see [Index.resolve]). A
// batch whose acknowledgement was lost is sent again with the same
// message ids: when the first one was stored the stream rejects the
// second as a duplicate, and the writer looks for its batch after the
// tail it expected (see landed), even when another writer committed
// after it meanwhile; the index returned has no revision then.
func (w *writer) sendBatch(ctx context.Context, ix Index, stored []Entry, adopted []uint64, tail uint64) (Index, error) {
	s := w.s
	fresh := stored[len(adopted):]
	nx := ix.next(stored, append(adopted, make([]uint64, len(fresh))...), w.o)
	msgs := make([]*nats.Msg, 0, len(fresh)+1)
	for i, e := range fresh {
		m := entryMessage{id: w.entryID(e), source: s.source, session: w.tape}
		msg := &nats.Msg{Subject: w.subj, Data: encodeMessage(m, e), Header: messageHeader(m.id)}
		if i == 0 {
			msg.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(tail, 10)}
		}
		msgs = append(msgs, msg)
	}
	msgs = append(msgs, indexMessage(s.names, s.source, nx, len(fresh), w.rev, w.msgID("index")))
	var seq uint64
	err := jsretry.Read(ctx, func(ctx context.Context) error {
		// Each attempt is a new batch: one that lost its leader half-way
		// is dropped by the server.
		b, err := jetstreamext.NewBatchPublisher(s.js, jetstreamext.BatchFlowControl{AckTimeout: jsretry.ReadAttempt})
		if err != nil {
			return err
		}
		for _, m := range msgs[:len(msgs)-1] {
			if err := b.AddMsg(m); err != nil {
				return s.sized(err, m)
			}
		}
		ack, err := b.CommitMsg(ctx, msgs[len(msgs)-1])
		if err == nil {
			seq = ack.Sequence
		}
		return s.sized(err, msgs[len(msgs)-1])
	})
	if err == nil {
		nx.Revision = seq
		nx.resolve(seq, len(fresh))
		return nx, nil
	}
	dup := isAPIError(err, errCodeBatchDuplicate)
	if !dup && !isWrongLastSeq(err) {
		return Index{}, fmt.Errorf("publishing: %w", err)
	}
	if dup && len(fresh) == 0 {
		// Only the index can be the duplicate: an attempt of this batch
		// stored it, and with it won the compare-and-set.
		return Index{}, nil
	}
	if dup {
		// The server checks message ids before the expected sequences,
		// so the duplicate is this batch, stored by an attempt whose
		// answer got lost, or an orphan of this commit that a checked
		// chain left, which a repair adopts. The subject's last
		// sequence cannot tell them apart, but a batch is stored
		// consecutively, so its first entry right after the tail it
		// expected locates all of it. The stream leader answers (see
		// landed): a replica that lags may not have stored the batch.
		m, err := s.leaderRead(ctx, msgGetRequest{Seq: tail + 1, NextFor: w.subj})
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return Index{}, fmt.Errorf("reading the batch: %w", err)
		}
		if err == nil && m.Header.Get(subjects.HeaderMsgID) == w.entryID(fresh[0]) {
			first := m.Sequence
			if len(adopted) > 0 {
				first = adopted[0]
			}
			if ok, err := w.landed(ctx, first, m.Sequence+uint64(len(fresh))-1, stored); err != nil || ok {
				return Index{}, err
			}
		}
		return Index{}, errTail
	}
	last, err := s.lastSeq(ctx, w.subj)
	switch {
	case err != nil:
		return Index{}, err
	case last != tail:
		return Index{}, errTail
	}
	return Index{}, errRetry // the index moved: another writer committed
}

// landed reports whether stored, this commit's entries, stored at stream
// sequences first through last, are committed, and then replaces them
// with the entries read from there. An append has to find out when an
// attempt of it was stored although its answer got lost and another
// writer committed after it before the retry: the retry then fails as if
// it had lost to that writer, and starting over would store the commit a
// second time under new ids (without a commit id nothing else tells).
// It reads the entry at last, the next one and the index from the stream
// leader (leaderRead), which has every message the stream stored: a
// replica that lags could answer that they are not there. Others may
// write meanwhile, so only facts that stay true once seen count: the
// tape's next entry expected the subject to end at last (a writer's
// first entry expects the last committed entry of its index, and no
// writer but this commit's continues after its entries), or an index
// ends at last (an index names only committed positions; a fence
// publishes the index it fences again).
func (w *writer) landed(ctx context.Context, first, last uint64, stored []Entry) (bool, error) {
	s := w.s
	m, err := s.leaderRead(ctx, msgGetRequest{Seq: last, NextFor: w.subj})
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("reading the commit: %w", err)
	}
	if err != nil || m.Sequence != last || m.Header.Get(subjects.HeaderMsgID) != w.entryID(stored[len(stored)-1]) {
		return false, nil
	}
	next, err := s.leaderRead(ctx, msgGetRequest{Seq: last + 1, NextFor: w.subj})
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("reading the commit: %w", err)
	}
	if err != nil || next.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != strconv.FormatUint(last, 10) {
		ix, err := s.index(ctx, w.tape, true)
		if err != nil || ix.Entries == 0 || ix.Seq != last {
			return false, err
		}
	}
	got, err := s.readCommitted(ctx, Index{Tape: w.tape, Seq: last, LastID: stored[len(stored)-1].ID}, first, stored[0].ID, int64(len(stored)), false)
	if errors.Is(err, errRetry) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	copy(stored, got)
	return true, nil
}

// putIndex publishes ix, whose positions are all known, if the tape's
// index is still at revision rev, and returns its revision. A lost
// compare-and-set returns errRetry; one it had won already (an earlier
// attempt with the same id was stored) returns that revision.
func (s *JetStreamStore) putIndex(ctx context.Context, ix Index, rev uint64, id string) (uint64, error) {
	m := indexMessage(s.names, s.source, ix, 0, rev, id)
	// Transient errors (the stream electing a leader) are retried with
	// the same message id: an attempt that was stored although its answer
	// got lost answers the next one as a duplicate, with its sequence.
	var ack *jetstream.PubAck
	err := jsretry.Read(ctx, func(ctx context.Context) error {
		f, err := s.send(m)
		if err == nil {
			ack, err = awaitAck(ctx, f, nil)
		}
		return err
	})
	if isWrongLastSeq(err) {
		// One server checks the expected sequence before its duplicate
		// window, so an attempt stored although its answer got lost makes
		// the next one fail so: it is this index when the subject's last
		// message, as the stream leader answers it (a replica that lags
		// may not have stored it), carries its id.
		if last, gerr := s.leaderRead(ctx, msgGetRequest{LastFor: m.Subject}); gerr == nil && last.Header.Get(subjects.HeaderMsgID) == id {
			return last.Sequence, nil
		}
		return 0, errRetry
	}
	if err != nil {
		return 0, fmt.Errorf("writing index: %w", err)
	}
	return ack.Sequence, nil
}

// send publishes m asynchronously under the store's send lock, as every
// message the store publishes outside a chain must be: one sent while a
// chain holds the lock would land between the chain's first entry and its
// pipelined ones, whose predicted sequences would then all fail and go
// out again one by one (see writer.publish).
func (s *JetStreamStore) send(m *nats.Msg) (jetstream.PubAckFuture, error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	f, err := s.js.PublishMsgAsync(m)
	return f, s.sized(err, m)
}

// sendWindow sends msgs (each through send) and returns their stream
// sequences once all are acknowledged, errAckLost when that takes longer
// than asyncAckTimeout.
func (s *JetStreamStore) sendWindow(ctx context.Context, msgs []*nats.Msg) ([]uint64, error) {
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		var err error
		if futures[i], err = s.send(m); err != nil {
			return nil, err
		}
	}
	lost := time.NewTimer(asyncAckTimeout)
	defer lost.Stop()
	seqs := make([]uint64, len(futures))
	for i, f := range futures {
		ack, err := awaitAck(ctx, f, lost.C)
		if err != nil {
			return nil, err
		}
		seqs[i] = ack.Sequence
	}
	return seqs, nil
}

// awaitAck waits for the acknowledgement of f: errAckLost when lost fires
// first (nil never does), ctx.Err() when ctx ends first.
func awaitAck(ctx context.Context, f jetstream.PubAckFuture, lost <-chan time.Time) (*jetstream.PubAck, error) {
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, err
	case <-lost:
		return nil, errAckLost
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// repair handles the orphans in (ix.Seq, last]. When they are a prefix of
// this very commit written from the current index revision it adopts
// them: their stored entries replace the first ones of stored and their
// sequences are returned. Otherwise another writer is at work or died:
// while the orphans are younger than the grace period (measured from when
// this call first saw the newest of them, so no clocks are compared) it
// waits for the index to change and returns errWait; then it fences the
// index, deletes them and returns errRetry. It reads the orphans from the
// stream leader, one message get each (scanLeader): a consumer may be
// placed on a replica that lags, which would answer fewer of them, and
// the commit would then be written over the others.
func (w *writer) repair(ctx context.Context, ix Index, last uint64, stored []Entry) ([]uint64, error) {
	type orphan struct {
		seq   uint64
		msgID string
		entry Entry
		ok    bool
	}
	var orphans []orphan
	err := w.s.scanLeader(ctx, w.subj, ix.Seq+1, last, 0, func(seq uint64, msgID string, data []byte) error {
		e, ok := decodeMessage(data)
		orphans = append(orphans, orphan{seq, msgID, e, ok})
		return nil
	})
	if err != nil {
		return nil, err
	}
	adopt := len(orphans) <= len(stored)
	for i, o := range orphans {
		adopt = adopt && o.ok && o.msgID == w.entryID(stored[i]) && o.entry.ID == stored[i].ID
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
	if _, err := w.s.putIndex(ctx, ix, ix.Revision, w.msgID("fence")); err != nil {
		return nil, err
	}
	for _, o := range orphans {
		if err := w.s.stream.DeleteMsg(ctx, o.seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("deleting uncommitted entry at sequence %d: %w", o.seq, err)
		}
	}
	return nil, errRetry
}

// waitIndexChange returns when the index of ix.Tape has a revision other
// than ix.Revision, or after d.
func (s *JetStreamStore) waitIndexChange(ctx context.Context, ix Index, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := s.watchIndex(ctx, ix.Tape, ix.Revision, func(nx Index) bool { return nx.Revision != ix.Revision })
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	return err
}

// publish stores entries after the subject's message prev, as a checked
// chain, and returns their stream sequences. errTail means the subject
// did not end at prev, so nothing was stored. The first message is
// published synchronously; the following ones are pipelined, each
// expecting both the stream's and the subject's last sequence to be its
// predecessor's (exact as long as no other subject is written meanwhile,
// which the store's send lock ensures for the writes of this process);
// after the first failed prediction the rest goes one by one, each
// expecting its predecessor's real sequence.
func (w *writer) publish(ctx context.Context, entries []Entry, prev uint64) ([]uint64, error) {
	seqs := make([]uint64, 0, len(entries))
	msg := func(i int) *nats.Msg {
		m := entryMessage{id: w.entryID(entries[i]), source: w.s.source, session: w.tape}
		return &nats.Msg{Subject: w.subj, Data: encodeMessage(m, entries[i]), Header: messageHeader(m.id)}
	}
	publishOne := func(i int) error {
		m := msg(i)
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
			ack, err = w.s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(prev))
			return w.s.sized(err, m)
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
			m := msg(j)
			f, err := w.s.js.PublishMsgAsync(m,
				jetstream.WithExpectLastSequence(expect),
				jetstream.WithExpectLastSequencePerSubject(expect))
			if err != nil {
				return nil, fmt.Errorf("publishing: %w", w.s.sized(err, m))
			}
			futures = append(futures, f)
		}
		unlock()
		failed := false
		lost := time.NewTimer(asyncAckTimeout)
		defer lost.Stop()
		for _, f := range futures {
			ack, err := awaitAck(ctx, f, lost.C)
			switch {
			case err == nil:
				if failed {
					return nil, errRetry // a success after a gap: someone else writes this tape
				}
				// A duplicate is this commit's own entry (see publishOne).
				prev = ack.Sequence
				seqs = append(seqs, prev)
				i++
			case isWrongLastSeq(err):
				failed, pipelined = true, false
			case errors.Is(err, errAckLost):
				// The acknowledgements went with the stream's leader:
				// start over from a fresh index; what was stored is this
				// commit's own and is adopted (see repair).
				return nil, errRetry
			case ctx.Err() != nil:
				return nil, ctx.Err()
			default:
				return nil, fmt.Errorf("publishing: %w", err)
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
	return isAPIError(err, jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func isAPIError(err error, codes ...jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && slices.Contains(codes, apiErr.ErrorCode)
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
// it has none, as the stream leader answers it (leaderGet): a writer reads
// it after a conflict, to find where the tape's subject ends, and a
// replica that lags would answer an older end.
func (s *JetStreamStore) lastSeq(ctx context.Context, subj string) (uint64, error) {
	m, err := s.leaderRead(ctx, msgGetRequest{LastFor: subj})
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

// sized names, in a publish error that is nats.ErrMaxPayload, the tape
// message m (its id) and its size beside the server's max_payload: the
// server takes no message that large, so the write cannot succeed as it
// is; other errors are returned as they are.
func (s *JetStreamStore) sized(err error, m *nats.Msg) error {
	if !errors.Is(err, nats.ErrMaxPayload) {
		return err
	}
	return fmt.Errorf("tape message %s is %d bytes, more than the NATS server's max_payload (%d bytes): %w",
		m.Header.Get(subjects.HeaderMsgID), m.Size()-len(m.Subject)-len(m.Reply), s.js.Conn().MaxPayload(), err)
}
