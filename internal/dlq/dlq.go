package dlq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/subjects"
)

// Reasons a message is dead-lettered.
const (
	ReasonUndecodable  = "undecodable"
	ReasonUnknownType  = "unknown_type"
	ReasonInvalid      = "invalid_envelope"
	ReasonMaxDelivered = "max_delivered"
	// ReasonSendFailed: a channel could not deliver an outbound envelope
	// (it said so, or every delivery failed).
	ReasonSendFailed = "send_failed"
	// ReasonPayloadTooLarge: a turn failed because a message of it (an
	// event, its reply) is larger than the NATS server's max_payload; the
	// inbound envelope waits here to be replayed once that is raised.
	ReasonPayloadTooLarge = "payload_too_large"
)

// Writer dead-letters messages.
type Writer struct {
	js    jetstream.JetStream
	names subjects.Names
	log   *slog.Logger
}

// NewWriter returns a writer publishing to the DLQ stream.
func NewWriter(js jetstream.JetStream, names subjects.Names, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{js: js, names: names, log: log}
}

// Reject dead-letters msg ([Writer.Hold]), then terminates it so it is
// never redelivered. When the copy fails, msg is negatively acknowledged
// instead so it is retried rather than lost.
func (w *Writer) Reject(ctx context.Context, msg jetstream.Msg, reason string, cause error) error {
	if err := w.Hold(ctx, msg, reason, cause); err != nil {
		if nerr := msg.Nak(); nerr != nil {
			err = errors.Join(err, nerr)
		}
		return err
	}
	return msg.TermWithReason(reason)
}

// Hold copies msg to bub.dlq.<reason> with the reason, the error text,
// the original subject and headers, and where msg is stored, and leaves
// msg to the caller ([Writer.Reject] terminates it; the recorder
// acknowledges it once the run it belongs to is committed). The copy's
// Nats-Msg-Id is derived from msg's stream sequence, so a redelivery of
// msg (its caller restarted before acknowledging or terminating it) is
// dead-lettered once, within the dead-letter stream's dedupe window.
func (w *Writer) Hold(ctx context.Context, msg jetstream.Msg, reason string, cause error) error {
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	return w.HoldStored(ctx, md.Stream, &jetstream.RawStreamMsg{Subject: msg.Subject(), Sequence: md.Sequence.Stream, Header: msg.Headers(), Data: msg.Data()}, reason, cause)
}

// HoldStored copies raw, a message read from stream (a direct get, not a
// delivery), as [Writer.Hold] copies a delivered one: with where it is
// stored and a Nats-Msg-Id derived from that, so two readers that
// dead-letter the same message store one letter.
func (w *Writer) HoldStored(ctx context.Context, stream string, raw *jetstream.RawStreamMsg, reason string, cause error) error {
	if err := w.publish(ctx, raw.Subject, raw.Header, raw.Data, reason, cause, storedCopy(stream, raw.Sequence)); err != nil {
		return err
	}
	w.log.Warn("dlq.rejected", "subject", raw.Subject, "reason", reason, "err", cause)
	return nil
}

// storedCopy are the headers of the dead letter of stream message seq:
// where it comes from, and a Nats-Msg-Id derived from that.
func storedCopy(stream string, seq uint64) map[string]string {
	n := strconv.FormatUint(seq, 10)
	return map[string]string{
		subjects.HeaderMsgID:     stream + "-" + n,
		subjects.HeaderDLQStream: stream,
		subjects.HeaderDLQSeq:    n,
	}
}

// Copy publishes a dead letter of a message no stream holds (one
// received over core NATS).
func (w *Writer) Copy(ctx context.Context, subject string, header nats.Header, data []byte, reason string, cause error) error {
	return w.publish(ctx, subject, header, data, reason, cause, nil)
}

// publish publishes a dead letter with extra headers set last.
func (w *Writer) publish(ctx context.Context, subject string, header nats.Header, data []byte, reason string, cause error, extra map[string]string) error {
	out := nats.NewMsg(w.names.DLQ(reason))
	for k, v := range header {
		if strings.HasPrefix(k, "Nats-") {
			// What JetStream acts on when a message is published
			// (Nats-Expected-Stream, which the events bridge sets, would
			// refuse the letter; Nats-Msg-Id would deduplicate a
			// replayed copy away), not part of the message.
			continue
		}
		out.Header[k] = append([]string(nil), v...)
	}
	out.Header.Set(subjects.HeaderDLQReason, reason)
	out.Header.Set(subjects.HeaderDLQSubject, subject)
	if cause != nil {
		out.Header.Set(subjects.HeaderDLQError, cause.Error())
	}
	for k, v := range extra {
		out.Header.Set(k, v)
	}
	out.Data = data
	if _, err := w.js.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("dead-lettering %s (%s): %w", subject, reason, err)
	}
	return nil
}
