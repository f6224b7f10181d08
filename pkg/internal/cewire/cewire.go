package cewire

import (
	"time"

	"github.com/bubbus/bub/pkg/internal/jsonesc"
)

// Head holds the attributes an event writes before its data.
type Head struct {
	ID, Source, Type string
	// Subject is left out when empty.
	Subject         string
	DataContentType string
	Time            time.Time
}

// AppendHead appends `{"specversion":"1.0","id":…,"source":…,"type":…`,
// then `,"subject":…` when set, `,"datacontenttype":…` and `,"time":…`
// (RFC 3339 in UTC, nanoseconds as needed) to b, strings escaped with
// esc. The object is left open for the data and the extensions.
func AppendHead(b []byte, esc jsonesc.Options, h Head) []byte {
	b = append(b, `{"specversion":"1.0","id":`...)
	b = esc.Append(b, h.ID)
	b = AppendAttr(b, esc, "source", h.Source)
	b = AppendAttr(b, esc, "type", h.Type)
	if h.Subject != "" {
		b = AppendAttr(b, esc, "subject", h.Subject)
	}
	b = AppendAttr(b, esc, "datacontenttype", h.DataContentType)
	b = append(b, `,"time":"`...)
	b = h.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendAttr appends `,"name":` and value as a JSON string escaped with
// esc; name must need no escaping.
func AppendAttr(b []byte, esc jsonesc.Options, name, value string) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return esc.Append(b, value)
}
