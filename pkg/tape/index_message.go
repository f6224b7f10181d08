package tape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/internal/cewire"
	"github.com/bubbus/bub/pkg/internal/jsonesc"
	"github.com/bubbus/bub/pkg/subjects"
)

// This file is the form of a tape's index as a NATS message of the tapes
// stream: a CloudEvents 1.0 event in structured JSON mode
// (docs/events/README.md, "Tape entries"), whose data is the [Index] and
// the number of entries committed with it.

// IndexEventType is the CloudEvent type of a tape's index message.
const IndexEventType = "dev.bub.tape.index.v1"

// wireIndex is the data of an index event: the index, with the positions
// of the entries of its own batch written as 0, and that batch's size.
type wireIndex struct {
	Index
	// Batch is the number of entries stored in the same atomic batch,
	// just before the index message.
	Batch int `json:"batch"`
}

// appendIndexMessage appends the structured-mode CloudEvent of ix, the
// index committing the batch of n entries it is published after, to b.
func appendIndexMessage(b []byte, m entryMessage, ix Index, n int) []byte {
	b = cewire.AppendHead(b, jsonesc.Python, cewire.Head{ID: m.id, Source: m.source, Type: IndexEventType, Subject: m.session, DataContentType: dataContentType, Time: time.Now().UTC()})
	b = cewire.AppendAttr(b, jsonesc.Python, "partitionkey", m.session)
	b = cewire.AppendAttr(b, jsonesc.Python, "sessionid", m.session)
	data, _ := json.Marshal(wireIndex{Index: ix, Batch: n}) // plain values: cannot fail
	b = append(b, dataKey...)
	b = append(b, data...)
	return append(b, '}')
}

// indexMessage is the message of index ix, committing the n entries
// published just before it, with event id id and source source: it
// expects the tape's index to be at revision rev (0: none yet) and rolls
// up the older ones.
func indexMessage(names subjects.Names, source string, ix Index, n int, rev uint64, id string) *nats.Msg {
	m := &nats.Msg{Subject: names.TapeIndex(ix.Tape), Data: encoded(func(b []byte) []byte {
		return appendIndexMessage(b, entryMessage{id: id, source: source, session: ix.Tape}, ix, n)
	}), Header: messageHeader(id)}
	m.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(rev, 10)}
	m.Header[jetstream.MsgRollup] = []string{jetstream.MsgRollupSubject}
	return m
}

// decodeIndex returns the index an index message at stream sequence seq
// holds, with its batch's positions filled in; tape, when not empty, is
// the tape the message was read for.
func decodeIndex(tape string, seq uint64, body []byte) (Index, error) {
	var w struct {
		eventHead
		Data *wireIndex `json:"data"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(body), &w); err != nil {
		return Index{}, fmt.Errorf("decoding index of tape %q: %w", tape, err)
	}
	if !w.is(IndexEventType) || w.Data == nil || w.Data.Batch < 0 || int64(w.Data.Batch) > w.Data.Entries {
		return Index{}, fmt.Errorf("decoding index of tape %q: %w", tape, errNotIndex)
	}
	ix := w.Data.Index
	if tape != "" {
		ix.Tape = tape
	}
	ix.Revision = seq
	ix.resolve(seq, w.Data.Batch)
	return ix, nil
}

var errNotIndex = errors.New("not a " + IndexEventType + " event with its index as data")

// resolve fills in the positions that an index message at stream
// sequence own names 0: those of the n entries of its own batch, stored
// consecutively just before it, ids LastID-n+1 … LastID.
func (ix *Index) resolve(own uint64, n int) {
	if n <= 0 || own <= uint64(n) || ix.LastID < int64(n) {
		return
	}
	first := ix.LastID - int64(n) + 1
	pos := func(id int64) uint64 { return own - uint64(ix.LastID-id) - 1 }
	ix.Seq = own - 1
	if ix.FirstSeq == 0 {
		ix.FirstSeq = pos(ix.LastID - ix.Entries + 1)
	}
	in := func(id int64) bool { return id >= first && id <= ix.LastID }
	for i, a := range ix.RecentAnchors {
		if a.Seq == 0 && in(a.ID) {
			ix.RecentAnchors[i].Seq = pos(a.ID)
		}
	}
	// Each end on its own: a commit that adopted entries a crashed chain
	// stored before the batch knows its first position already.
	for i, c := range ix.Commits {
		if c.Count == 0 {
			continue
		}
		if c.FirstSeq == 0 && in(c.FirstID) {
			ix.Commits[i].FirstSeq = pos(c.FirstID)
		}
		if last := c.FirstID + int64(c.Count) - 1; c.LastSeq == 0 && in(last) {
			ix.Commits[i].LastSeq = pos(last)
		}
	}
}
