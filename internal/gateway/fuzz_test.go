package gateway

import (
	"strings"
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

// FuzzParseMark: a claim's value (the delivered bucket is writable by
// anyone with access to it) never panics the parser, never yields a
// negative count, and every mark the gateway writes parses back to what
// it wrote.
func FuzzParseMark(f *testing.F) {
	for _, seed := range []string{"claimed", "claimed:2", "partial:0:3", "partial:2:1", "sent", "", ":", "x:-1:-2", "a:b:c:d"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		kind, parts, failed := parseMark([]byte(v))
		if parts < 0 || failed < 0 {
			t.Fatalf("%q: parts %d, failed %d", v, parts, failed)
		}
		if strings.Contains(kind, ":") {
			return // not a kind the gateway writes
		}
		if k, p, fl := parseMark(mark(kind, parts, failed)); k != kind || p != parts || fl != failed {
			t.Fatalf("mark(%q, %d, %d) parses as %q, %d, %d", kind, parts, failed, k, p, fl)
		}
	})
}
