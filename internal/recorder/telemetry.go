package recorder

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// traceHeaders returns the NATS headers of the events a commit covers, in
// run order (items are sorted by seq), for the commit span's parent and
// links; an interrupted run keeps only its held messages, so those are
// used when no item has one.
func traceHeaders(items []item, msgs []jetstream.Msg) []nats.Header {
	var out []nats.Header
	for _, it := range items {
		if it.msg != nil {
			out = append(out, it.msg.Headers())
		}
	}
	if len(out) == 0 {
		for _, m := range msgs {
			out = append(out, m.Headers())
		}
	}
	return out
}
