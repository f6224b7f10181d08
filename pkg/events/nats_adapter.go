package events

// This file adapts CloudEvents to NATS messages; it and nats_bridge.go are
// the only files of the package that use nats.go types.

import (
	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/subjects"
)

// ToMsg returns a NATS message carrying e in structured mode on subject,
// with Nats-Msg-Id set to the event id so JetStream deduplicates retries.
func ToMsg(subject string, e ce.Event) (*nats.Msg, error) {
	body, err := Encode(e)
	if err != nil {
		return nil, err
	}
	tp, ts := Traceparent(e)
	return structuredMsg(subject, e.ID(), tp, ts, body), nil
}

// structuredMsg is the message of a structured-mode event with id and
// trace context.
func structuredMsg(subject, id, traceparent, tracestate string, body []byte) *nats.Msg {
	// Room for the headers set here and the publish options' own.
	msg := &nats.Msg{Subject: subject, Data: body, Header: make(nats.Header, 6)}
	msg.Header.Set("Content-Type", ContentTypeStructured)
	msg.Header.Set(subjects.HeaderMsgID, id)
	if traceparent != "" {
		msg.Header.Set(subjects.HeaderTraceparent, traceparent)
		if tracestate != "" {
			msg.Header.Set(subjects.HeaderTracestate, tracestate)
		}
	}
	return msg
}

// FromMsg decodes the CloudEvent of a NATS message in either content mode.
func FromMsg(msg *nats.Msg) (ce.Event, error) { return Decode(msg.Header, msg.Data) }
