package tape

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/bubbus/bub/pkg/internal/bufpool"
	"github.com/bubbus/bub/pkg/internal/cewire"
	"github.com/bubbus/bub/pkg/internal/jsonesc"
)

// This file is the form of an entry as a NATS message of the tapes stream:
// a CloudEvents 1.0 event in structured JSON mode (docs/events/README.md,
// "Tape entries"), whose data is the entry's JSON line. The event is
// written here rather than with package events, which sits above the tape
// (docs/ARCHITECTURE.md, "Layers"); it is what events.New followed by
// events.Encode would write, attribute for attribute.

// EntryEventType is the CloudEvent type of a stored tape entry.
const EntryEventType = "dev.bub.tape.entry.v1"

// The CloudEvents attributes of an entry message that do not come from
// the entry.
const (
	specVersion     = "1.0"
	dataContentType = "application/json"
)

// entryMessage is what an entry message says beyond the entry.
type entryMessage struct {
	// id is the event id, equal to the message's Nats-Msg-Id.
	id string
	// source names the writer: /bub/tape/<connection name>.
	source string
	// session is the tape's name: the subject attribute and the sessionid
	// and partitionkey extensions.
	session string
}

// encoded returns what appendTo appends to an empty slice, in a slice of
// exactly that size. It appends to a pooled buffer and copies the result
// out, so a message costs one allocation of its size instead of one per
// doubling of a buffer grown from nothing.
func encoded(appendTo func([]byte) []byte) []byte {
	p := bufpool.Get()
	*p = appendTo(*p)
	out := slices.Clone(*p)
	bufpool.Put(p)
	return out
}

// encodeMessage is appendMessage to an empty slice (see encoded).
func encodeMessage(m entryMessage, e Entry) []byte {
	return encoded(func(b []byte) []byte { return appendMessage(b, m, e) })
}

// appendMessage appends the structured-mode CloudEvent of entry e to b:
// time is the entry's date in UTC (or now when the date is not an RFC 3339
// time of the years 0-9999, as an imported date may not be) and runid the
// run_id of its meta, if any. The data comes last, so that a reader finds
// it without scanning the attributes twice (see decodeMessage).
func appendMessage(b []byte, m entryMessage, e Entry) []byte {
	t, err := time.Parse(time.RFC3339Nano, e.Date)
	if t = t.UTC(); err != nil || t.Year() > 9999 || t.Year() < 0 {
		t = time.Now()
	}
	b = cewire.AppendHead(b, jsonesc.Python, cewire.Head{ID: m.id, Source: m.source, Type: EntryEventType, Subject: m.session, DataContentType: dataContentType, Time: t})
	if m.session != "" {
		b = cewire.AppendAttr(b, jsonesc.Python, "partitionkey", m.session)
	}
	if run, ok := e.Meta["run_id"].(string); ok && run != "" {
		b = cewire.AppendAttr(b, jsonesc.Python, "runid", run)
	}
	if m.session != "" {
		b = cewire.AppendAttr(b, jsonesc.Python, "sessionid", m.session)
	}
	b = append(b, dataKey...)
	b = appendEntry(b, e)
	return append(b, '}')
}

// dataKey introduces the data of an entry event as appendMessage writes
// it. The entry's own JSON (Python's separators, ", " and ": ") never
// holds it, and no attribute string can.
const dataKey = `,"data":`

// wireMessage is the decoding form of a message of the tapes stream: an
// entry event, or a bare entry line as stores before the event form wrote
// them (its fields are the embedded wireEntry's). Absent attributes stay
// empty: no pointers, so decoding allocates no more than a bare line does.
type wireMessage struct {
	wireEntry
	eventHead
	Data wireEntry `json:"data"`
}

// eventHead is the decoding form of an entry event's attributes.
type eventHead struct {
	SpecVersion     string `json:"specversion"`
	Type            string `json:"type"`
	DataContentType string `json:"datacontenttype"`
}

// is reports whether h is the head of an event of type typ whose data is
// JSON.
func (h *eventHead) is(typ string) bool {
	return h.SpecVersion == specVersion && h.Type == typ &&
		(h.DataContentType == "" || h.DataContentType == dataContentType)
}

// ourHead reports whether head, the attributes before the data, is an
// entry event's as appendMessage writes them: valid JSON, the specversion
// first, the type and the content type at the top level (a `,"` cannot be
// inside a string, and appendMessage writes no nested value).
func ourHead(head []byte) bool {
	if !bytes.HasPrefix(head, []byte(`{"specversion":"`+specVersion+`",`)) ||
		!bytes.Contains(head, []byte(`,"type":"`+EntryEventType+`",`)) ||
		!bytes.Contains(head, []byte(`,"datacontenttype":"`+dataContentType+`",`)) ||
		bytes.Contains(head[1:], []byte("{")) {
		return false
	}
	var buf [512]byte
	return json.Valid(append(append(buf[:0], head...), '}'))
}

// decodeMessage returns the entry of a message of the tapes stream, in
// either form. ok is false when the body is neither an entry event
// (specversion 1.0, type [EntryEventType], JSON data holding a valid
// entry) nor a valid bare entry. An event laid out as appendMessage writes
// it, data last, is read as its attributes and its data, each scanned
// once; any other body in one pass over the whole.
func decodeMessage(body []byte) (e Entry, ok bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return Entry{}, false
	}
	if i := bytes.Index(body, []byte(dataKey)); i > 0 && body[len(body)-1] == '}' && ourHead(body[:i]) {
		var w wireEntry
		if json.Unmarshal(body[i+len(dataKey):len(body)-1], &w) == nil {
			return w.entry()
		}
	}
	var w wireMessage
	if json.Unmarshal(body, &w) != nil {
		return Entry{}, false
	}
	if w.SpecVersion == "" {
		return w.wireEntry.entry() // a legacy bare entry
	}
	if !w.is(EntryEventType) {
		return Entry{}, false
	}
	return w.Data.entry() // no data or not an entry: no payload object
}
