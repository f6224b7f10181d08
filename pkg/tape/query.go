package tape

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bubbus/bub/pkg/bub"
)

// Query selects entries of one tape (Bub's TapeQuery). It is an immutable
// builder: every method returns a modified copy. The zero value (also
// returned by [All]) selects the whole tape.
//
// [Query.Apply] defines what a query means; every store returns exactly
// what Apply returns for the tape's committed entries.
type Query struct {
	text         string
	afterAnchor  string
	lastAnchor   bool
	between      bool
	betweenStart string
	betweenEnd   string
	dates        bool
	dateStart    string
	dateEnd      string
	kinds        []string
	limit        int
	limited      bool
}

// All returns the query for the whole tape: every entry, every kind, no
// limit.
func All() Query { return Query{} }

// Text keeps entries whose JSON rendering {kind, date, payload, meta}
// contains s, case-insensitively. Unlike Python Bub, whose rendering escapes
// non-ASCII characters so that a non-ASCII query never matches, the
// rendering keeps them: "café" finds "Café". An empty s removes the filter.
func (q Query) Text(s string) Query {
	q.text = s
	return q
}

// AfterAnchor starts the selection after the LAST anchor named name. An
// empty name clears both AfterAnchor and LastAnchor.
func (q Query) AfterAnchor(name string) Query {
	q.lastAnchor = false
	q.afterAnchor = name
	return q
}

// LastAnchor starts the selection after the last anchor of any name and
// clears AfterAnchor.
func (q Query) LastAnchor() Query {
	q.afterAnchor = ""
	q.lastAnchor = true
	return q
}

// BetweenAnchors selects the entries strictly between the last anchor named
// start and the first anchor named end after it. It takes precedence over
// LastAnchor, which takes precedence over AfterAnchor.
func (q Query) BetweenAnchors(start, end string) Query {
	q.between, q.betweenStart, q.betweenEnd = true, start, end
	return q
}

// BetweenDates keeps entries dated from start to end inclusive. Each bound
// is an ISO date ("2026-05-14": a start means 00:00:00 UTC, an end the last
// microsecond of that day) or an ISO datetime (naive means UTC). Bad bounds
// make the query fail with "Invalid ISO date or datetime: '<v>'." and
// start > end with "Start date must be earlier than or equal to end date.".
// Entries whose own date does not parse are left out.
func (q Query) BetweenDates(start, end string) Query {
	q.dates, q.dateStart, q.dateEnd = true, start, end
	return q
}

// Kinds keeps entries of the given kinds; no kinds removes the filter.
func (q Query) Kinds(kinds ...string) Query {
	q.kinds = slices.Clone(kinds)
	return q
}

// Limit keeps the first n entries (oldest first); a negative n removes the
// limit.
func (q Query) Limit(n int) Query {
	q.limit, q.limited = n, n >= 0
	return q
}

// entryFilters returns the part of q that judges entries one by one:
// dates, text and kinds, without the anchor slice and the limit.
func (q Query) entryFilters() Query {
	return Query{text: q.text, dates: q.dates, dateStart: q.dateStart, dateEnd: q.dateEnd, kinds: q.kinds}
}

// withoutLimit returns q with no limit.
func (q Query) withoutLimit() Query {
	q.limit, q.limited = 0, false
	return q
}

// sliceMode names which anchor rule decides the slice, by precedence.
type sliceMode int

const (
	sliceAll sliceMode = iota
	sliceBetween
	sliceLast
	sliceAfter
)

func (q Query) mode() sliceMode {
	switch {
	case q.between:
		return sliceBetween
	case q.lastAnchor:
		return sliceLast
	case q.afterAnchor != "":
		return sliceAfter
	}
	return sliceAll
}

// anchorNotFound is the error for a missing named anchor.
func anchorNotFound(name string) error {
	return bub.Errorf(bub.KindNotFound, "Anchor '%s' was not found.", name)
}

// errNoAnchors is the error of a LastAnchor query on a tape without anchors.
func errNoAnchors() error { return bub.Errorf(bub.KindNotFound, "No anchors found in tape.") }

// Apply returns the entries of an ordered tape that q selects, in Bub's
// order of evaluation: the anchor slice (BetweenAnchors, else LastAnchor,
// else AfterAnchor), then dates, text, kinds and limit. Errors are
// *bub.Error values with Bub's messages. Apply does not copy the entries.
func (q Query) Apply(entries []Entry) ([]Entry, error) {
	start, end := 0, len(entries)
	switch q.mode() {
	case sliceBetween:
		s := lastAnchorIndex(entries, q.betweenStart, true)
		if s < 0 {
			return nil, anchorNotFound(q.betweenStart)
		}
		e := -1
		for i := s + 1; i < len(entries); i++ {
			if name, ok := entries[i].AnchorName(); ok && name == q.betweenEnd {
				e = i
				break
			}
		}
		if e < 0 {
			return nil, anchorNotFound(q.betweenEnd)
		}
		start, end = s+1, e
	case sliceLast:
		s := lastAnchorIndex(entries, "", false)
		if s < 0 {
			return nil, errNoAnchors()
		}
		start = s + 1
	case sliceAfter:
		s := lastAnchorIndex(entries, q.afterAnchor, true)
		if s < 0 {
			return nil, anchorNotFound(q.afterAnchor)
		}
		start = s + 1
	}
	// Capped: an append to the result never writes into entries, which
	// MemoryStore and Fork read unlocked while they append in place
	// beyond the length a reader saw.
	out := entries[start:end:end]

	if q.dates {
		from, err := parseBound(q.dateStart, false)
		if err != nil {
			return nil, err
		}
		to, err := parseBound(q.dateEnd, true)
		if err != nil {
			return nil, err
		}
		if from.After(to) {
			return nil, bub.Errorf(bub.KindInvalidInput, "Start date must be earlier than or equal to end date.")
		}
		out = filter(out, func(e Entry) bool {
			at, err := parseBound(e.Date, false)
			return err == nil && !at.Before(from) && !at.After(to)
		})
	}
	if q.text != "" {
		needle := strings.ToLower(q.text)
		out = filter(out, func(e Entry) bool { return strings.Contains(searchText(e), needle) })
	}
	if len(q.kinds) > 0 {
		out = filter(out, func(e Entry) bool { return slices.Contains(q.kinds, e.Kind) })
	}
	if q.limited && len(out) > q.limit {
		out = out[:q.limit]
	}
	return out, nil
}

// lastAnchorIndex returns the index of the last anchor (named name when
// named is true), or -1.
func lastAnchorIndex(entries []Entry, name string, named bool) int {
	for i := len(entries) - 1; i >= 0; i-- {
		if n, ok := entries[i].AnchorName(); ok && (!named || n == name) {
			return i
		}
	}
	return -1
}

// filter returns the entries keep accepts, in a new slice.
func filter(entries []Entry, keep func(Entry) bool) []Entry {
	var out []Entry
	for _, e := range entries {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// searchText is the lowercased rendering a text query searches.
func searchText(e Entry) string {
	return strings.ToLower(pyJSON(map[string]any{
		"kind": e.Kind, "date": e.Date, "payload": e.Payload, "meta": e.Meta,
	}))
}

// isoRE matches the ISO-8601 forms Python's datetime.fromisoformat accepts
// in practice: a date, an optional time (hours, minutes, seconds, any
// fraction) after "T" or a space, and an optional "Z" or ±HH[:MM[:SS]] offset.
var isoRE = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})` +
	`(?:[T ](\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,](\d+))?)?)?` +
	`(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2}(?:\.\d+)?)?)?)?)?$`)

// parseBound parses an ISO date or datetime. A date alone means the start
// of that day in UTC, or its last microsecond when end is true; a datetime
// without an offset is UTC.
func parseBound(value string, end bool) (time.Time, error) {
	m := isoRE.FindStringSubmatch(value)
	if m == nil {
		return time.Time{}, bub.Errorf(bub.KindInvalidInput, "Invalid ISO date or datetime: '%s'.", value)
	}
	num := func(s string) int {
		n, _ := strconv.Atoi(s)
		return n
	}
	year, month, day := num(m[1]), num(m[2]), num(m[3])
	hasTime := m[4] != ""
	hour, minute, sec, nsec := num(m[4]), num(m[5]), num(m[6]), 0
	if frac := m[7]; frac != "" {
		frac = (frac + "000000000")[:9]
		nsec = num(frac) / 1000 * 1000 // Python keeps microseconds
	}
	loc := time.UTC
	if off := m[8]; off != "" && off != "Z" {
		sign := 1
		if off[0] == '-' {
			sign = -1
		}
		digits := strings.ReplaceAll(off[1:], ":", "")
		if i := strings.IndexByte(digits, '.'); i >= 0 {
			digits = digits[:i]
		}
		digits += "0000"
		secs := num(digits[0:2])*3600 + num(digits[2:4])*60 + num(digits[4:6])
		if secs >= 24*3600 {
			return time.Time{}, bub.Errorf(bub.KindInvalidInput, "Invalid ISO date or datetime: '%s'.", value)
		}
		loc = time.FixedZone("", sign*secs)
	}
	if !hasTime && end {
		hour, minute, sec, nsec = 23, 59, 59, 999999000
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	if t.Year() != year || t.Month() != time.Month(month) || t.Day() != day ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, bub.Errorf(bub.KindInvalidInput, "Invalid ISO date or datetime: '%s'.", value)
	}
	return t.UTC(), nil
}
