package ingress

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

// eachHeader calls add with each "Key: value" line of lines.
func eachHeader(lines string, add func(key, value string)) {
	for line := range strings.SplitSeq(lines, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) != "" {
			add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
}

// FuzzDecodeRequest feeds arbitrary HTTP headers and bodies to the
// request decoder: it never panics, every failure carries an error code,
// and whatever it accepts has content (or media). The header argument is
// "Key: value" lines.
func FuzzDecodeRequest(f *testing.F) {
	f.Add("Content-Type: application/json", []byte(`{"content":"hi","session_id":"s"}`))
	f.Add("", []byte(`{"content":"hi","context":{"a":1},"media":[{"type":"image","mime_type":"image/png"}]}`))
	f.Add("Content-Type: application/json", []byte(`{"content":"hi","extra":1}`))
	f.Add("Content-Type: application/json", []byte(`{"content":"hi"} {"content":"again"}`))
	f.Add("Content-Type: text/plain", []byte(`hello`))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/c","type":"dev.bub.envelope.inbound.v1","datacontenttype":"application/json","data":{"content":"hi"}}`))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/c","type":"other","data":{}}`))
	f.Add("Ce-Specversion: 1.0\nCe-Id: 1\nCe-Source: /c\nCe-Type: dev.bub.envelope.inbound.v1\nContent-Type: application/json", []byte(`{"content":"hi"}`))
	f.Add("Ce-Specversion: 1.0\nCe-Type: dev.bub.envelope.inbound.v1", []byte(`{"content":"hi"}`))
	f.Add("", []byte("\x00\xff{"))
	f.Fuzz(func(t *testing.T, headers string, body []byte) {
		h := http.Header{}
		eachHeader(headers, h.Add)
		env, code, err := DecodeRequest(h, body)
		if err != nil {
			if code == "" || env != nil {
				t.Fatalf("failure without a code or with an envelope: %q %v %v", code, env, err)
			}
			return
		}
		if env == nil || env.Content == "" && len(env.Media) == 0 {
			t.Fatalf("accepted an envelope without content: %+v", env)
		}
	})
}

// FuzzDecodeOutbound feeds arbitrary NATS headers and bodies to the
// outbound decoder (live replies and the stored replies a retry returns):
// it never panics and accepts only outbound-envelope CloudEvents. The
// header argument is "Key: value" lines.
func FuzzDecodeOutbound(f *testing.F) {
	ev, err := events.New(events.TypeEnvelopeOutbound, events.Attrs{ID: "e1/0", Source: "/bub/worker/w", SessionID: "s"},
		&envelope.Envelope{ID: "e1/0", Content: "reply", InReplyTo: "e1", BatchSize: 1})
	if err != nil {
		f.Fatal(err)
	}
	msg, err := events.ToMsg("bub.outbound.http.s", ev)
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
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/w","type":"dev.bub.envelope.outbound.v1","data":{"id":"x/0","content":"hi","in_reply_to":"x"}}`))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/w","type":"dev.bub.envelope.inbound.v1","data":{"content":"hi"}}`))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/w","type":"dev.bub.envelope.outbound.v1","data":"not an object"}`))
	f.Add("", []byte("garbage"))
	f.Fuzz(func(t *testing.T, headers string, body []byte) {
		h := nats.Header{}
		eachHeader(headers, h.Add)
		m := &nats.Msg{Subject: "bub.outbound.http.s", Header: h, Data: body}
		if _, err := decodeOutbound(m.Header, m.Data); err != nil {
			return
		}
		ev, err := events.FromMsg(m)
		if err != nil || ev.Type() != events.TypeEnvelopeOutbound {
			t.Fatalf("accepted a message that is not an outbound envelope event: %v %v", ev, err)
		}
	})
}

// FuzzParseTapePage feeds arbitrary query strings to the tape page
// decoder: it never panics, what it accepts is within bounds, and a
// rejection names the parameter.
func FuzzParseTapePage(f *testing.F) {
	for _, q := range []string{"", "offset=0&limit=50", "limit=500", "limit=501", "offset=-1", "offset=1e3", "q=needle&offset=3",
		"offset=99999999999999999999", "limit=%zz", "q=" + strings.Repeat("x", 300), "offset=&limit="} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := ParseTapePage(v)
		if err != nil {
			if p != (TapePage{}) || !strings.Contains(err.Error(), "offset") && !strings.Contains(err.Error(), "limit") && !strings.Contains(err.Error(), "q is") {
				t.Fatalf("rejection %v with page %+v", err, p)
			}
			return
		}
		if p.Offset < 0 || p.Limit < 1 || p.Limit > maxTapeLimit || len(p.Query) > maxTapeQuery || p.Tail != (v.Get("offset") == "") {
			t.Fatalf("accepted an out-of-bounds page %+v from %q", p, raw)
		}
	})
}

// FuzzSSEEvent feeds arbitrary NATS headers and bodies, from the token
// stream or the events subject, to the SSE renderer: it never panics,
// every message becomes one event whose data is one line (SSE's framing),
// a token delta is passed on as the JSON it is (compacted when it spans
// lines), and a lifecycle event is the structured CloudEvent of its type.
func FuzzSSEEvent(f *testing.F) {
	f.Add(true, "", []byte(`{"run_id":"r","seq":1,"kind":"text","text":"hi\nthere"}`))
	f.Add(true, "", []byte("{\"run_id\":\n\"r\"}"))
	f.Add(true, "", []byte(`not json`))
	f.Add(false, "Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"1","source":"/c","type":"dev.bub.turn.started.v1","data":{"a":1}}`))
	f.Add(false, "Content-Type: application/cloudevents+json", []byte("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"/c\",\"type\":\"t\",\"datacontenttype\":\"application/json\",\"data\":{\n\"a\": 1\r\n}}"))
	f.Add(false, "Ce-Specversion: 1.0\nCe-Id: 1\nCe-Source: /c\nCe-Type: t\nContent-Type: application/json", []byte("{\n\"a\": 1}"))
	f.Add(false, "", []byte(`{"run_id":"r"}`))
	f.Fuzz(func(t *testing.T, delta bool, headers string, body []byte) {
		m := &nats.Msg{Subject: "bub.events.s", Header: nats.Header{}, Data: body}
		eachHeader(headers, m.Header.Add)
		name, data := sseEvent(m, delta)
		if name == "" || strings.ContainsAny(name, "\r\n") || strings.ContainsAny(string(data), "\r\n") {
			t.Fatalf("event %q with data %q: not one line each", name, data)
		}
		switch {
		case name == "invalid":
		case delta:
			var want bytes.Buffer
			if name != "delta" || json.Compact(&want, body) != nil || string(data) != want.String() && string(data) != string(body) {
				t.Fatalf("token delta rendered as %q %q", name, data)
			}
		default:
			ev, err := events.Decode(http.Header{"Content-Type": {events.ContentTypeStructured}}, data)
			if err != nil || ev.Type() != name {
				t.Fatalf("lifecycle event %q rendered as %q, which decodes to %v, %v", body, data, ev.Type(), err)
			}
		}
	})
}
