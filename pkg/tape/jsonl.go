package tape

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// WriteJSONL writes entries in Bub's tape file format: one JSON object
// {"id", "kind", "payload", "meta", "date"} per line, rendered like Python's
// json.dumps(..., ensure_ascii=False) (non-ASCII kept, no HTML escaping)
// with object keys sorted. Exporting, importing with [ReadJSONL] and
// exporting again gives the same bytes.
func WriteJSONL(w io.Writer, entries []Entry) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, e := range entries {
		line = appendEntry(line[:0], e)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("writing tape entry %d: %w", e.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing tape entries: %w", err)
	}
	return nil
}

// ReadJSONL reads a Bub tape file. Like Bub's FileTapeStore it skips blank
// lines, lines that are not JSON and invalid records (id not an integer,
// kind not a string, payload not an object, date present but not a
// string); a missing or invalid meta becomes {}, and a missing date is
// derived from a legacy "timestamp" (epoch seconds, default 0). Only read
// errors are returned. NaN, Infinity and -Infinity, which Python's json
// writes and reads, become null. Numbers are float64 (as in every Entry
// payload), so an integer beyond 2^53 (a 64-bit chat id) comes back
// rounded; Python keeps it exact.
func ReadJSONL(r io.Reader) ([]Entry, error) {
	br := bufio.NewReader(r)
	var entries []Entry
	for {
		line, err := br.ReadBytes('\n')
		if e, ok := decodeEntry(line); ok {
			entries = append(entries, e)
		}
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return entries, fmt.Errorf("reading tape file: %w", err)
		}
	}
}

// appendEntry appends the JSON line form of e (without newline) to b.
func appendEntry(b []byte, e Entry) []byte {
	b = append(b, `{"id": `...)
	b = strconv.AppendInt(b, e.ID, 10)
	b = append(b, `, "kind": `...)
	b = appendString(b, e.Kind)
	b = append(b, `, "payload": `...)
	b = appendJSON(b, nonNilMap(e.Payload))
	b = append(b, `, "meta": `...)
	b = appendJSON(b, nonNilMap(e.Meta))
	b = append(b, `, "date": `...)
	b = appendString(b, e.Date)
	return append(b, '}')
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// wireEntry is the tolerant decoding form of a tape line.
type wireEntry struct {
	ID        json.RawMessage `json:"id"`
	Kind      json.RawMessage `json:"kind"`
	Payload   map[string]any  `json:"payload"`
	Meta      any             `json:"meta"`
	Date      json.RawMessage `json:"date"`
	Timestamp json.RawMessage `json:"timestamp"`
}

// decodeEntry parses one tape line; ok is false for lines Bub skips.
func decodeEntry(line []byte) (e Entry, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Entry{}, false
	}
	var w wireEntry
	if err := json.Unmarshal(line, &w); err != nil {
		// Python's json writes NaN, Infinity and -Infinity and reads them
		// back: such a line is Bub's, kept with those numbers as null.
		finite, ok := nullNonFinite(line)
		if !ok || json.Unmarshal(finite, &w) != nil {
			return Entry{}, false // not JSON
		}
	}
	return w.entry()
}

// nonFinite are Python's JSON tokens for the floats JSON has no numbers
// for, longest first.
var nonFinite = [...]string{"-Infinity", "Infinity", "NaN"}

// nullNonFinite returns line with every non-finite token outside strings
// replaced by null, and whether there was one.
func nullNonFinite(line []byte) ([]byte, bool) {
	var (
		out      []byte
		inString bool
		found    bool
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inString:
			if c == '\\' && i+1 < len(line) {
				out = append(out, c, line[i+1])
				i++
				continue
			}
			inString = c != '"'
		case c == '"':
			inString = true
		default:
			if tok := nonFiniteAt(line[i:]); tok != "" {
				out = append(out, "null"...)
				i += len(tok) - 1
				found = true
				continue
			}
		}
		out = append(out, c)
	}
	return out, found
}

func nonFiniteAt(b []byte) string {
	for _, tok := range nonFinite {
		if bytes.HasPrefix(b, []byte(tok)) {
			return tok
		}
	}
	return ""
}

// entry validates w as Bub does; ok is false for records Bub skips.
func (w *wireEntry) entry() (e Entry, ok bool) {
	if w.Payload == nil {
		return Entry{}, false // payload not an object
	}
	id, err := strconv.ParseInt(string(w.ID), 10, 64)
	if err != nil {
		return Entry{}, false
	}
	if len(w.Kind) == 0 || w.Kind[0] != '"' || json.Unmarshal(w.Kind, &e.Kind) != nil {
		return Entry{}, false
	}
	e.ID, e.Payload = id, w.Payload
	if e.Meta, ok = w.Meta.(map[string]any); !ok {
		e.Meta = map[string]any{}
	}
	if w.Date != nil {
		if w.Date[0] != '"' || json.Unmarshal(w.Date, &e.Date) != nil {
			return Entry{}, false
		}
		return e, true
	}
	ts := 0.0
	if w.Timestamp != nil && json.Unmarshal(w.Timestamp, &ts) != nil {
		return Entry{}, false
	}
	sec, frac := math.Modf(ts)
	e.Date = FormatDate(time.Unix(int64(sec), int64(math.Round(frac*1e6))*1000))
	return e, true
}
