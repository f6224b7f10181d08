package events

import (
	"encoding/json"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/bubbus/bub/pkg/internal/cewire"
	"github.com/bubbus/bub/pkg/internal/jsonesc"
)

// This file is the bridge's fast path: the structured-mode JSON of a
// lifecycle event written straight from its attributes and payload,
// without building a ce.Event (whose setters, extension map, validation and
// encoder cost more than the publish itself). The output is byte for byte
// what [New] followed by [Encode] produces; wireEncoder.ok says when the
// fast path applies, and the bridge falls back to New and ToMsg otherwise.

// wireEncoder writes the structured events of one source.
type wireEncoder struct {
	// source is the source as the SDK prints it (a parsed URI reference);
	// valid is false when it does not parse, so every event takes the slow
	// path and fails there as before.
	source string
	valid  bool
}

func newWireEncoder(source string) wireEncoder {
	u, err := url.Parse(source)
	if err != nil || source == "" {
		return wireEncoder{}
	}
	return wireEncoder{source: (&types.URIRef{URL: *u}).String(), valid: true}
}

// ok reports whether the fast path writes exactly what New would: New
// trims spaces around the id, type and subject, and stores seq as a
// CloudEvents integer (int32).
func (w wireEncoder) ok(typ string, a Attrs) bool {
	return w.valid && typ != "" && trimmed(typ) && trimmed(a.ID) && trimmed(a.SessionID) &&
		a.Seq <= math.MaxInt32 && !a.Time.IsZero()
}

func trimmed(s string) bool { return strings.TrimSpace(s) == s }

// encode returns the structured-mode JSON of an event of type typ with
// attributes a (ID and Time set) and payload data.
func (w wireEncoder) encode(typ string, a Attrs, data any) ([]byte, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 256+len(raw)+2*len(a.SessionID)+len(a.RunID)+len(a.Traceparent)+len(a.Tracestate))
	b = cewire.AppendHead(b, jsonesc.SDK, cewire.Head{ID: a.ID, Source: w.source, Type: typ, Subject: a.SessionID, DataContentType: ContentTypeJSON, Time: a.Time})
	b = append(b, `,"data":`...)
	b = append(b, raw...)
	// Extensions in name order, as the SDK writes them.
	if a.SessionID != "" {
		b = cewire.AppendAttr(b, jsonesc.SDK, ExtPartitionKey, a.SessionID)
	}
	if a.RunID != "" {
		b = cewire.AppendAttr(b, jsonesc.SDK, ExtRunID, a.RunID)
	}
	if a.Seq > 0 {
		b = append(b, `,"`+ExtSeq+`":`...)
		b = strconv.AppendInt(b, a.Seq, 10)
	}
	if a.SessionID != "" {
		b = cewire.AppendAttr(b, jsonesc.SDK, ExtSessionID, a.SessionID)
	}
	if a.Traceparent != "" {
		b = cewire.AppendAttr(b, jsonesc.SDK, ExtTraceparent, a.Traceparent)
		if a.Tracestate != "" {
			b = cewire.AppendAttr(b, jsonesc.SDK, ExtTracestate, a.Tracestate)
		}
	}
	return append(b, '}'), nil
}
