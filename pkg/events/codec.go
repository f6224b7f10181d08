package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	ce "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"
	"io"
)

// Content types.
const (
	// ContentTypeStructured is the media type of a structured-mode event.
	ContentTypeStructured = "application/cloudevents+json"
	// ContentTypeJSON is the datacontenttype of every Bub payload.
	ContentTypeJSON = "application/json"
)

// Extension attribute names (docs/events/README.md, "Attributes and
// extensions").
const (
	ExtRunID        = "runid"
	ExtSessionID    = "sessionid"
	ExtSeq          = "seq"
	ExtPartitionKey = "partitionkey"
	ExtTraceparent  = "traceparent"
	ExtTracestate   = "tracestate"
)

// Attrs are the attributes Bub sets on every CloudEvent it publishes.
type Attrs struct {
	// ID is the event id and its Nats-Msg-Id (JetStream's dedupe key): a
	// fresh UUIDv7 when empty, which lifecycle events use; envelopes pass
	// their envelope id (docs/events/README.md, "Event ids").
	ID string
	// Source is /bub/<service>/<instance>.
	Source string
	// SessionID is the raw session id: the CloudEvent subject and the
	// sessionid and partitionkey extensions.
	SessionID string
	// RunID correlates the events, hook calls and tape entries of one run.
	RunID string
	// Seq orders the events of one run (1, 2, …); 0 omits it.
	Seq int64
	// Time defaults to now.
	Time time.Time
	// Traceparent and Tracestate carry the W3C trace context.
	Traceparent string
	Tracestate  string
}

// Source returns the CloudEvent source of a service instance:
// /bub/<service>/<instance>.
func Source(service, instance string) string { return "/bub/" + service + "/" + instance }

// New builds a CloudEvent of type typ carrying data as JSON.
func New(typ string, a Attrs, data any) (ce.Event, error) {
	e := ce.New()
	if a.ID == "" {
		a.ID = NewID()
	}
	e.SetID(a.ID)
	e.SetType(typ)
	e.SetSource(a.Source)
	if a.Time.IsZero() {
		a.Time = time.Now()
	}
	e.SetTime(a.Time.UTC())
	if a.SessionID != "" {
		e.SetSubject(a.SessionID)
		e.SetExtension(ExtSessionID, a.SessionID)
		e.SetExtension(ExtPartitionKey, a.SessionID)
	}
	if a.RunID != "" {
		e.SetExtension(ExtRunID, a.RunID)
	}
	if a.Seq > 0 {
		e.SetExtension(ExtSeq, a.Seq)
	}
	if a.Traceparent != "" {
		e.SetExtension(ExtTraceparent, a.Traceparent)
		if a.Tracestate != "" {
			e.SetExtension(ExtTracestate, a.Tracestate)
		}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return ce.Event{}, fmt.Errorf("encoding %s data: %w", typ, err)
	}
	e.DataEncoded = raw
	e.SetDataContentType(ContentTypeJSON)
	if err := e.Validate(); err != nil {
		return ce.Event{}, fmt.Errorf("building %s event: %w", typ, err)
	}
	return e, nil
}

// Encode returns the structured-mode JSON of e. Bub publishes structured
// mode: the NATS message body is the whole CloudEvent, so it survives any
// bridge that drops headers, dead-letter copies keep every attribute, and
// `nats sub` shows a self-describing event.
func Encode(e ce.Event) ([]byte, error) { return e.MarshalJSON() }

// Decoding errors; [Decode] wraps them with detail.
var (
	// ErrNotCloudEvent: the message is neither structured nor binary mode.
	ErrNotCloudEvent = errors.New("not a CloudEvent")
	// ErrInvalidEvent: the event fails CloudEvents validation.
	ErrInvalidEvent = errors.New("invalid CloudEvent")
)

// Decode reads a CloudEvent from message headers and body in either content
// mode: structured (the body is the event; content type
// application/cloudevents+json, or a JSON body with "specversion") or binary
// (ce-* headers, the body is the data). Header keys may use any case.
func Decode(header map[string][]string, body []byte) (ce.Event, error) {
	if structuredOnly(header) {
		// What Bub itself publishes: the body is the whole event, which is
		// what the generic path below would unmarshal too, without first
		// wrapping the message as an HTTP request.
		// json.Unmarshal(body, &ev) is what that path runs; it scans the
		// body twice before handing it to ev.UnmarshalJSON, once suffices.
		if !json.Valid(body) {
			return ce.Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, json.Unmarshal(body, new(json.RawMessage)))
		}
		ev := ce.New()
		if err := ev.UnmarshalJSON(bytes.TrimSpace(body)); err != nil {
			return ce.Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		if err := ev.Validate(); err != nil {
			return ce.Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		return ev, nil
	}
	h := make(http.Header, len(header))
	for k, v := range header {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if ck == binaryPrefix {
			// sdk-go's binary reader indexes past the prefix (a panic).
			return ce.Event{}, fmt.Errorf("%w: header %q names no attribute", ErrInvalidEvent, k)
		}
		if len(v) > 0 { // the reader takes each header's first value
			h[ck] = v
		}
	}
	if h.Get("Content-Type") == "" && h.Get("Ce-Specversion") == "" && looksStructured(body) {
		h.Set("Content-Type", ContentTypeStructured)
	}
	msg := cehttp.NewMessage(h, io.NopCloser(bytes.NewReader(body)))
	if msg.ReadEncoding() == binding.EncodingUnknown {
		return ce.Event{}, ErrNotCloudEvent
	}
	ev, err := binding.ToEvent(context.Background(), msg)
	if err != nil {
		return ce.Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if err := ev.Validate(); err != nil {
		return ce.Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return *ev, nil
}

// binaryPrefix is the canonical prefix of a binary-mode attribute header.
const binaryPrefix = "Ce-"

// structuredOnly reports whether header says structured JSON mode in the
// exact form [ToMsg] writes (one Content-Type value, canonical key) and
// carries no binary-mode attribute.
func structuredOnly(header map[string][]string) bool {
	ct := header["Content-Type"]
	if len(ct) != 1 || ct[0] != ContentTypeStructured {
		return false
	}
	for k := range header {
		if len(k) > 3 && (k[0] == 'c' || k[0] == 'C') && (k[1] == 'e' || k[1] == 'E') && (k[2] == '-' || k[2] == '_') {
			return false
		}
		if k != "Content-Type" && strings.EqualFold(k, "Content-Type") {
			return false
		}
	}
	return true
}

func looksStructured(body []byte) bool {
	body = bytes.TrimSpace(body)
	return len(body) > 0 && body[0] == '{' && bytes.Contains(body, []byte(`"specversion"`))
}

// DecodeData unmarshals the JSON data of e, which must be one JSON value,
// into v, rejecting unknown content types.
func DecodeData(e ce.Event, v any) error {
	if ct := e.DataContentType(); ct != "" && !strings.HasPrefix(ct, ContentTypeJSON) && !strings.HasSuffix(ct, "+json") {
		return fmt.Errorf("%w: datacontenttype %q is not JSON", ErrInvalidEvent, ct)
	}
	if err := json.Unmarshal(e.Data(), v); err != nil {
		return fmt.Errorf("%w: data of %s: %w", ErrInvalidEvent, e.Type(), err)
	}
	return nil
}

// RunID returns the runid extension of e, or "".
func RunID(e ce.Event) string { return extString(e, ExtRunID) }

// SessionID returns the session id of e: its subject, or the sessionid
// extension.
func SessionID(e ce.Event) string {
	if s := e.Subject(); s != "" {
		return s
	}
	return extString(e, ExtSessionID)
}

// Seq returns the seq extension of e, or 0.
func Seq(e ce.Event) int64 {
	v, ok := e.Extensions()[ExtSeq]
	if !ok {
		return 0
	}
	i, err := types.ToInteger(v)
	if err != nil {
		if s, ok := v.(string); ok {
			var n int64
			if _, err := fmt.Sscan(s, &n); err == nil {
				return n
			}
		}
		return 0
	}
	return int64(i)
}

// Traceparent returns the traceparent and tracestate extensions of e.
func Traceparent(e ce.Event) (traceparent, tracestate string) {
	return extString(e, ExtTraceparent), extString(e, ExtTracestate)
}

func extString(e ce.Event, name string) string {
	v, ok := e.Extensions()[name]
	if !ok {
		return ""
	}
	s, err := types.ToString(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return s
}
