package admission

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

// FuzzDecodeSteer feeds arbitrary headers and bodies to the steering
// message decoder: it never panics, and whatever it accepts is a valid
// inbound envelope. The header argument is "Key: value" lines.
func FuzzDecodeSteer(f *testing.F) {
	ev, err := events.New(events.TypeEnvelopeInbound, events.Attrs{ID: "e1", Source: "/bub/worker/w", SessionID: "s"}, &envelope.Envelope{ID: "e1", Content: "steer me"})
	if err != nil {
		f.Fatal(err)
	}
	msg, err := events.ToMsg("bub.steer.s", ev)
	if err != nil {
		f.Fatal(err)
	}
	var binary []string
	for k, vs := range msg.Header {
		for _, v := range vs {
			binary = append(binary, k+": "+v)
		}
	}
	f.Add(strings.Join(binary, "\n"), msg.Data)
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/c","type":"dev.bub.envelope.inbound.v1","data":{"id":"x","content":"hi"}}`))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/c","type":"dev.bub.envelope.inbound.v1","data":{"content":""}}`))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/c","type":"dev.bub.run.started.v1","data":{}}`))
	f.Add("", []byte("garbage"))
	f.Fuzz(func(t *testing.T, headers string, body []byte) {
		h := nats.Header{}
		for line := range strings.SplitSeq(headers, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) != "" {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		env, err := DecodeSteer(h, body)
		if err != nil {
			return
		}
		if env.Validate() != nil || env.ID == "" {
			t.Fatalf("accepted an invalid envelope %+v", env)
		}
	})
}

// FuzzDecodeQuit: a quit broadcast (core NATS, any publisher) either
// decodes to a request naming a session or is rejected, never a panic.
func FuzzDecodeQuit(f *testing.F) {
	f.Add([]byte(`{"session":"http:c1","except":"m1"}`))
	f.Add([]byte(`{"session":""}`))
	f.Add([]byte(`{"session":7}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := decodeQuit(data)
		if err == nil && q.Session == "" {
			t.Fatalf("accepted a quit without a session: %q", data)
		}
	})
}
