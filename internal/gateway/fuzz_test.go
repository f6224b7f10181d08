package gateway

import (
	"testing"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

// FuzzDecodeOutbound feeds arbitrary messages of an outbound subject to
// the decoder: it never panics, and it either returns an envelope with an
// id or a dead-letter reason.
func FuzzDecodeOutbound(f *testing.F) {
	good, err := events.New(events.TypeEnvelopeOutbound, events.Attrs{ID: "out-1", Source: "/test"}, &envelope.Envelope{ID: "out-1", Content: "hi"})
	if err != nil {
		f.Fatal(err)
	}
	body, err := events.Encode(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(events.ContentTypeStructured, body)
	f.Add("", []byte(`{"id":"x","content":"y"}`))
	f.Add("application/json", []byte("{"))
	f.Fuzz(func(t *testing.T, contentType string, data []byte) {
		header := map[string][]string{"Content-Type": {contentType}}
		env, reason, err := decodeOutbound(header, data)
		if err != nil {
			switch reason {
			case dlq.ReasonUndecodable, dlq.ReasonUnknownType, dlq.ReasonInvalid:
			default:
				t.Fatalf("error %v with reason %q", err, reason)
			}
			return
		}
		if env == nil || env.ID == "" || reason != "" {
			t.Fatalf("decoded %+v reason %q", env, reason)
		}
	})
}
