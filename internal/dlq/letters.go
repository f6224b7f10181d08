package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// Letter is one message in the dead-letter stream.
type Letter struct {
	// Seq is the letter's sequence in the dead-letter stream: its id for
	// `bub dlq replay --id`.
	Seq uint64 `json:"seq"`
	// EventID is the CloudEvent id of the original message when it has
	// one (ce-id header or the "id" of a structured event), else "".
	EventID string `json:"event_id,omitempty"`
	Reason  string `json:"reason"`
	Error   string `json:"error,omitempty"`
	// Subject is where the original message was published.
	Subject string    `json:"subject"`
	Time    time.Time `json:"time"`
	// Header holds the original headers plus the Bub-Dlq-* ones.
	Header nats.Header `json:"header,omitempty"`
	Data   []byte      `json:"data"`
}

// List returns the dead letters, oldest first; reason "" means all.
func List(ctx context.Context, js jetstream.JetStream, names subjects.Names, reason string) ([]Letter, error) {
	st, err := js.Stream(ctx, names.DLQStream())
	if err != nil {
		return nil, fmt.Errorf("binding the dead-letter stream: %w", err)
	}
	filter := names.DLQAll()
	if reason != "" {
		filter = names.DLQ(reason)
	}
	var out []Letter
	for next := uint64(1); ; {
		raw, err := st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("reading dead letters: %w", err)
		}
		next = raw.Sequence + 1
		out = append(out, letterOf(raw))
	}
}

func letterOf(raw *jetstream.RawStreamMsg) Letter {
	h := raw.Header
	l := Letter{
		Seq:     raw.Sequence,
		Reason:  h.Get(subjects.HeaderDLQReason),
		Error:   h.Get(subjects.HeaderDLQError),
		Subject: h.Get(subjects.HeaderDLQSubject),
		Time:    raw.Time,
		Header:  h,
		Data:    raw.Data,
	}
	l.EventID = h.Get("ce-id")
	if l.EventID == "" {
		l.EventID = structuredID(raw.Data)
	}
	return l
}

// structuredID extracts "id" from a structured CloudEvent without
// decoding the rest (the message may be garbage; that is why it is here).
func structuredID(b []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	if err := jsonUnmarshal(b, &v); err != nil {
		return ""
	}
	return v.ID
}

// Matches reports whether the letter is named by id: its sequence or its
// event id.
func (l Letter) Matches(id string) bool {
	if n, err := strconv.ParseUint(id, 10, 64); err == nil && n == l.Seq {
		return true
	}
	return id != "" && id == l.EventID
}

// Replay re-publishes a dead letter to its original subject with its
// original headers (the Bub-Dlq-* ones removed) and then deletes it from
// the dead-letter stream. The republished message carries Nats-Msg-Id
// "dlq-replay-<seq>", so replaying the same letter twice within the
// duplicate window (a crash between publish and delete) publishes once.
func Replay(ctx context.Context, js jetstream.JetStream, names subjects.Names, l Letter) error {
	if l.Subject == "" {
		return fmt.Errorf("dead letter %d has no original subject", l.Seq)
	}
	msg := nats.NewMsg(l.Subject)
	for k, v := range l.Header {
		if strings.HasPrefix(k, "Bub-Dlq-") || k == subjects.HeaderMsgID {
			continue
		}
		msg.Header[k] = append([]string(nil), v...)
	}
	msg.Header.Set(subjects.HeaderMsgID, "dlq-replay-"+strconv.FormatUint(l.Seq, 10))
	msg.Data = l.Data
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("replaying dead letter %d to %s: %w", l.Seq, l.Subject, err)
	}
	st, err := js.Stream(ctx, names.DLQStream())
	if err != nil {
		return fmt.Errorf("binding the dead-letter stream: %w", err)
	}
	if err := st.DeleteMsg(ctx, l.Seq); err != nil && !Gone(err) {
		return fmt.Errorf("removing replayed dead letter %d: %w", l.Seq, err)
	}
	return nil
}

// Gone reports whether err from deleting or getting a stream message says
// the message is not (any more) there. nats.go reports a failed delete as
// ErrMsgDeleteUnsuccessful with the API error only as text.
func Gone(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return true
	case errors.As(err, &apiErr):
		return apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound || apiErr.ErrorCode == errCodeSequenceNotFound
	case errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful):
		return strings.Contains(err.Error(), "err_code=10043")
	}
	return false
}

// errCodeSequenceNotFound is the JetStream API error of deleting a
// message that is not there.
const errCodeSequenceNotFound jetstream.ErrorCode = 10043
