package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ce "github.com/cloudevents/sdk-go/v2/event"

	"github.com/bubbus/bub/pkg/events"
)

// FuzzDecode feeds arbitrary headers and bodies to Decode: it must never
// panic, and whatever it accepts must survive a structured-mode round
// trip with its attributes and data intact. The header argument is
// "Key: value" lines.
func FuzzDecode(f *testing.F) {
	examples, err := filepath.Glob(filepath.Join(docsDir, "*.example.json"))
	if err != nil || len(examples) == 0 {
		f.Fatalf("no golden examples: %v", err)
	}
	for _, path := range examples {
		body, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add("Content-Type: "+events.ContentTypeStructured, body)
		f.Add("", body)
	}
	binary := "ce-specversion: 1.0\nce-id: 1\nce-source: /bub/worker/w1\nce-type: dev.bub.step.started.v1\nce-subject: a.b c\nce-runid: r\nce-seq: 3\nContent-Type: application/json"
	f.Add(binary, []byte(`{"step":1}`))
	f.Add(binary, []byte(`not json`))
	f.Add(strings.ReplaceAll(binary, "application/json", "text/plain"), []byte("\x00\xff"))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"0.3","id":"x"}`))
	f.Add("Content-Type: application/cloudevents-batch+json", []byte(`[]`))
	f.Add("ce-specversion: 9.9", []byte(`{}`))
	f.Add("ce-specversion: 1.0\nce-: x", []byte(`{}`)) // a prefix without an attribute (sdk-go panicked)
	f.Add("", []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data_base64":"AAE="}`))

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		h := parseHeader(header)
		e, err := events.Decode(h, body)
		// Bub's own structured messages take a fast path; the generic
		// path (forced by a non-canonical header key) must agree with it.
		if v := h["Content-Type"]; len(h) == 1 && len(v) == 1 && v[0] == events.ContentTypeStructured {
			g, gerr := events.Decode(map[string][]string{"content-type": v}, body)
			if (err == nil) != (gerr == nil) {
				t.Fatalf("fast path error %v, generic path error %v", err, gerr)
			}
			if err == nil {
				sameEvent(t, e, g)
			}
		}
		if err != nil {
			return
		}
		enc, err := events.Encode(e)
		if err != nil || !json.Valid(enc) {
			// The sdk embeds JSON data verbatim; data that claims to be
			// JSON and is not cannot be re-encoded. Decoding it did not
			// panic, which is what is required of it.
			return
		}
		again, err := events.Decode(map[string][]string{"Content-Type": {events.ContentTypeStructured}}, enc)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		sameEvent(t, e, again)
	})
}

// TestDecodeRoundTrip: every golden example decodes in structured mode,
// and re-encoded in binary mode (ce-* headers, data as body) decodes to
// the same event.
func TestDecodeRoundTrip(t *testing.T) {
	examples, err := filepath.Glob(filepath.Join(docsDir, "*.example.json"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no golden examples: %v", err)
	}
	for _, path := range examples {
		e, err := events.Decode(nil, readFile(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		header := map[string][]string{"Content-Type": {e.DataContentType()}}
		ctx := e.Context.AsV1()
		for name, v := range map[string]string{"id": e.ID(), "source": e.Source(), "type": e.Type(), "subject": e.Subject(), "specversion": e.SpecVersion(),
			"time": ctx.Time.String()} {
			header["ce-"+name] = []string{v}
		}
		for name, v := range e.Extensions() {
			header["ce-"+name] = []string{stringOf(v)}
		}
		bin, err := events.Decode(header, e.Data())
		if err != nil {
			t.Fatalf("%s in binary mode: %v", path, err)
		}
		sameEvent(t, e, bin)
		if events.Seq(bin) != events.Seq(e) || events.RunID(bin) != events.RunID(e) {
			t.Fatalf("%s: extensions differ in binary mode", path)
		}
	}
}

func sameEvent(t *testing.T, a, b ce.Event) {
	t.Helper()
	if a.ID() != b.ID() || a.Type() != b.Type() || a.Source() != b.Source() || a.Subject() != b.Subject() ||
		a.DataContentType() != b.DataContentType() || !a.Time().Equal(b.Time()) {
		t.Fatalf("attributes differ:\n%s\n%s", a, b)
	}
	if !bytes.Equal(a.Data(), b.Data()) && !equalJSONBytes(a.Data(), b.Data()) {
		t.Fatalf("data differs: %q vs %q", a.Data(), b.Data())
	}
	if len(a.Extensions()) != len(b.Extensions()) {
		t.Fatalf("extensions differ: %v vs %v", a.Extensions(), b.Extensions())
	}
}

func equalJSONBytes(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && jsonString(x) == jsonString(y)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func stringOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsonString(v)
}

// parseHeader reads "Key: value" lines into a header map.
func parseHeader(s string) map[string][]string {
	h := map[string][]string{}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok {
			h[k] = append(h[k], strings.TrimSpace(v))
		}
	}
	return h
}

// TestDecodeRejectsHeadersThatNameNoAttribute: a binary-mode header that
// is the bare "ce-" prefix is an invalid event (sdk-go's reader indexed
// past it and panicked, found by FuzzDecodeRequest), and a header without
// values is ignored rather than read.
func TestDecodeRejectsHeadersThatNameNoAttribute(t *testing.T) {
	for _, key := range []string{"ce-", "Ce-", "CE-"} {
		_, err := events.Decode(map[string][]string{"ce-specversion": {"1.0"}, key: {""}}, []byte(`{}`))
		if !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), "names no attribute") {
			t.Errorf("header %q: error %v, want an invalid event naming no attribute", key, err)
		}
	}
	h := map[string][]string{"ce-specversion": {"1.0"}, "ce-id": {"1"}, "ce-source": {"/s"}, "ce-type": {"t"}, "ce-subject": {}}
	e, err := events.Decode(h, nil)
	if err != nil || e.Subject() != "" || e.ID() != "1" {
		t.Fatalf("event %v, error %v: want id 1 and no subject", e, err)
	}
}
