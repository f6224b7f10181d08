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
	// Room for the headers set here and the publish options' own. The
	// values share one backing array, each a full slice of its own (an
	// append elsewhere copies rather than overwrites a neighbour), and the
	// constant content type is shared by every message.
	h := make(nats.Header, 6)
	vals := make([]string, 3)
	vals[0], vals[1], vals[2] = id, traceparent, tracestate
	h["Content-Type"] = structuredContentType
	h[subjects.HeaderMsgID] = vals[0:1:1]
	if traceparent != "" {
		h[subjects.HeaderTraceparent] = vals[1:2:2]
		if tracestate != "" {
			h[subjects.HeaderTracestate] = vals[2:3:3]
		}
	}
	return &nats.Msg{Subject: subject, Data: body, Header: h}
}

// structuredContentType is the Content-Type header value of every
// structured-mode message; never modified.
var structuredContentType = []string{ContentTypeStructured}

// FromMsg decodes the CloudEvent of a NATS message in either content mode.
func FromMsg(msg *nats.Msg) (ce.Event, error) { return Decode(msg.Header, msg.Data) }
