package tape

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/jsretry"
	"github.com/bubbus/bub/pkg/subjects"
)

// This file is the part of the JetStream adapter that reads with
// requests of its own: committed entries with batched direct gets, which
// any replica answers, and single messages with message gets, which only
// the stream leader answers.

// directRequest is the body of a batched direct get (ADR-31): up to Batch
// messages of NextFor from stream sequence Seq on.
type directRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
}

// readDirect calls fn for the messages of subj with start <= sequence <=
// end, in order, at most limit of them, read with batched direct gets
// (subjects.Names.DirectGet): one request and one answer per
// [fetchChunk] messages, instead of creating, pulling from and deleting a
// consumer. Any replica of the stream may answer a direct get, and one
// that lags behind answers fewer messages; a request that fails (no
// responders on a stream without direct gets, a timeout) also ends the
// read early. So readDirect returns the sequence to go on from, and its
// caller reads the rest from the stream
// leader. Its only error is fn's.
func (s *JetStreamStore) readDirect(ctx context.Context, subj string, start, end uint64, limit int, fn func(seq uint64, msgID string, data []byte) error) (next uint64, err error) {
	next = start
	for n := 0; n < limit && next <= end; {
		got, last, more, err := s.directBatch(ctx, subj, next, end, min(limit-n, fetchChunk), fn)
		n += got
		if got > 0 {
			next = last + 1
		}
		if err != nil || !more {
			return next, err
		}
	}
	return next, nil
}

// directBatch is one request of [JetStreamStore.readDirect]. It returns
// the number of messages it passed to fn, the last one's sequence, and
// whether the answer was complete (every message asked for, none beyond
// end), so that another request may follow.
func (s *JetStreamStore) directBatch(ctx context.Context, subj string, start, end uint64, want int, fn func(seq uint64, msgID string, data []byte) error) (n int, last uint64, more bool, err error) {
	req, _ := json.Marshal(directRequest{Seq: start, NextFor: subj, Batch: want}) // cannot fail
	nc := s.js.Conn()
	inbox := nc.NewRespInbox()
	// The answer is at most want messages and the end-of-batch status, so
	// a channel of that size holds it all (SubscribeSync's would take
	// 64k slots).
	answers := make(chan *nats.Msg, want+1)
	sub, err := nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return 0, 0, false, nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(s.directSubject, inbox, req); err != nil {
		return 0, 0, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, jsretry.ReadAttempt)
	defer cancel()
	for {
		var msg *nats.Msg
		select {
		case msg = <-answers:
		case <-ctx.Done():
			return n, last, false, nil
		}
		if status := msg.Header.Get(subjects.HeaderStatus); status != "" || len(msg.Data) == 0 {
			// 204 EOB ends every batch; anything else (404: nothing from
			// start on, 503: no responders) ends the read.
			return n, last, status == "204" && n == want, nil
		}
		seq, perr := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
		if perr != nil || seq < start || seq <= last || seq > end {
			return n, last, false, nil
		}
		if err := fn(seq, msg.Header.Get(subjects.HeaderMsgID), msg.Data); err != nil {
			return n, last, false, err
		}
		n, last = n+1, seq
	}
}

// msgGetRequest is the body of a message get (STREAM.MSG.GET): the first
// message of NextFor from stream sequence Seq on, or the last message of
// LastFor.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

// msgGetResponse is the answer to a message get.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string `json:"subject"`
		Sequence uint64 `json:"seq"`
		Header   []byte `json:"hdrs,omitempty"`
		Data     []byte `json:"data,omitempty"`
	} `json:"message,omitempty"`
}

// leaderGet returns the message req asks for, [jetstream.ErrMsgNotFound]
// when there is none, with a message get: in a cluster only the stream
// leader answers one, so it sees every message the stream stored. The
// library's Stream.GetMsg and GetLastMsgForSubject send direct gets
// instead when the stream allows them, and any replica, one that lags
// too, answers those.
func (s *JetStreamStore) leaderGet(ctx context.Context, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	body, _ := json.Marshal(req) // cannot fail
	answer, err := s.js.Conn().RequestWithContext(ctx, s.msgGetSubject, body)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(answer.Data, &resp); err != nil {
		return nil, fmt.Errorf("decoding a message get's answer: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	m := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("decoding a message get's answer: %w", err)
		}
	}
	return m, nil
}

// leaderRead is leaderGet retrying transient errors for up to
// [jsretry.ReadBound] (see [jsretry.Read]): the writers read from the
// leader after an acknowledgement got lost, often because the leader
// moved, and the next one answers once it is elected.
func (s *JetStreamStore) leaderRead(ctx context.Context, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := jsretry.Read(ctx, func(ctx context.Context) (err error) {
		m, err = s.leaderGet(ctx, req)
		return err
	})
	return m, err
}
