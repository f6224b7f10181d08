package replies_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/replies"
)

func TestRecordedKeepsEveryRefOnceInOrder(t *testing.T) {
	ctx := replies.Collect(context.Background())
	a, b := replies.Ref{Stream: "BUB_OUTBOUND", Seq: 7}, replies.Ref{Stream: "BUB_OUTBOUND", Seq: 3}
	replies.Record(ctx, a)
	replies.Record(ctx, b)
	replies.Record(ctx, a) // a deduplicated republish acknowledges the original sequence
	if got := replies.Recorded(ctx); !slices.Equal(got, []replies.Ref{a, b}) {
		t.Fatalf("recorded %v, want [%v %v]", got, a, b)
	}
	bare := context.Background()
	replies.Record(bare, a)
	if got := replies.Recorded(bare); got != nil {
		t.Fatalf("recorded %v without a collection", got)
	}
}

func TestDoneRoundTrips(t *testing.T) {
	for _, d := range []replies.Done{
		{At: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC), Replies: []replies.Ref{{Stream: "BUB_OUTBOUND", Seq: 1}, {Stream: "BUB_OUTBOUND", Seq: 9}}},
		{At: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)}, // a turn that answered nothing
	} {
		raw, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := replies.Decode(raw)
		if err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		if !got.At.Equal(d.At) || !slices.Equal(got.Replies, d.Replies) || got.Replies == nil {
			t.Fatalf("round trip of %s gave %+v", raw, got)
		}
	}
}

func TestDecodeRejectsWhatEncodeNeverWrites(t *testing.T) {
	for _, raw := range []string{
		"2026-12-01T15:00:00Z", // a bare timestamp
		`{"at":"2026-12-01T15:00:00Z"}`,
		`{"at":"2026-12-01T15:00:00Z","replies":[{"stream":"","seq":1}]}`,
		`{"at":"2026-12-01T15:00:00Z","replies":[{"stream":"S","seq":0}]}`,
		`{"at":"2026-12-01T15:00:00Z","replies":[],"extra":1}`,
		`{"at":"2026-12-01T15:00:00Z","replies":[]} {}`,
	} {
		if d, err := replies.Decode([]byte(raw)); err == nil {
			t.Errorf("Decode(%s) = %+v, want an error", raw, d)
		}
	}
}
