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
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set("Content-Type", ContentTypeStructured)
	msg.Header.Set(subjects.HeaderMsgID, e.ID())
	if tp, ts := Traceparent(e); tp != "" {
		msg.Header.Set(subjects.HeaderTraceparent, tp)
		if ts != "" {
			msg.Header.Set(subjects.HeaderTracestate, ts)
		}
	}
	return msg, nil
}

// FromMsg decodes the CloudEvent of a NATS message in either content mode.
func FromMsg(msg *nats.Msg) (ce.Event, error) { return Decode(msg.Header, msg.Data) }
