package tape_test

import (
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/tape"
)

func TestQueryIsImmutable(t *testing.T) {
	entries := []tape.Entry{
		{ID: 1, Kind: tape.KindMessage, Date: "2024-01-01T00:00:00+00:00"},
		{ID: 2, Kind: tape.KindAnchor, Payload: map[string]any{"name": "a"}, Date: "2024-01-01T00:00:00+00:00"},
		{ID: 3, Kind: tape.KindEvent, Date: "2024-01-01T00:00:00+00:00"},
	}
	kinds := []string{tape.KindMessage, tape.KindEvent}
	base := tape.All().Kinds(kinds...)
	kinds[0] = tape.KindAnchor // the caller's slice is copied
	for _, derive := range []func(tape.Query) tape.Query{
		func(q tape.Query) tape.Query { return q.Limit(1) },
		func(q tape.Query) tape.Query { return q.LastAnchor() },
		func(q tape.Query) tape.Query { return q.Text("x") },
		func(q tape.Query) tape.Query { return q.BetweenDates("x", "y") },
		func(q tape.Query) tape.Query { return q.BetweenAnchors("a", "b") },
	} {
		derive(base)
	}
	got, err := base.Apply(entries)
	if err != nil {
		t.Fatal(err)
	}
	if ids := ids(got); !reflect.DeepEqual(ids, []int64{1, 3}) {
		t.Fatalf("base query changed by derived ones: %v", ids)
	}
}

func TestApplyDates(t *testing.T) {
	entries := []tape.Entry{
		{ID: 1, Date: "2024-02-29T23:00:00-02:00"}, // 2024-03-01T01:00Z
		{ID: 2, Date: "not a date"},
		{ID: 3, Date: "2024-03-01T00:30:00.123456789+00:00"},
		{ID: 4, Date: "2024-03-01"},
		{ID: 5, Date: "2024-03-01 10:00:00+0530"},
	}
	tests := []struct {
		start, end string
		want       []int64
		err        bool
	}{
		{"2024-03-01", "2024-03-01", []int64{1, 3, 4, 5}, false},
		{"2024-03-01T01:00:00Z", "2024-03-01T04:30:00Z", []int64{1, 5}, false},
		{"2024-03-01T00:30", "2024-03-01T00:30:00.123456", []int64{3}, false},
		{"2024-02-30", "2024-03-01", nil, true},
		{"2024-03-01T24:00:00", "2024-03-02", nil, true},
		{"2024-03-01T10:00:00+25:00", "2024-03-02", nil, true},
		{"20240301", "2024-03-02", nil, true},
	}
	for _, tt := range tests {
		got, err := tape.All().BetweenDates(tt.start, tt.end).Apply(entries)
		if tt.err != (err != nil) {
			t.Errorf("BetweenDates(%q, %q) error %v, want error %v", tt.start, tt.end, err, tt.err)
			continue
		}
		if g := ids(got); !tt.err && !reflect.DeepEqual(g, tt.want) {
			t.Errorf("BetweenDates(%q, %q) = %v, want %v", tt.start, tt.end, g, tt.want)
		}
	}
}
