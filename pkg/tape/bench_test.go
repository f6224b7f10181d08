package tape_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/tape"
)

// benchEntry is a typical chat entry of about 300 bytes.
func benchEntry(i int) tape.Entry {
	return tape.MessageEntry(map[string]any{
		"role":    "user",
		"content": fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum dolor sit amet ", 8)),
	}, map[string]any{"run_id": fmt.Sprintf("run-%d", i/10)})
}

// BenchmarkReadMessages reads the default context (after the last anchor,
// which is 50 entries back) of a small and of a large JetStream tape. The
// cost must not grow with the tape: the large tape may be at most 2x the
// small one.
func BenchmarkReadMessages(b *testing.B) {
	srv := natstest.Start(b)
	_, js := srv.JetStream(b)
	for _, n := range []int{100, 100_000} {
		s, err := tape.NewJetStreamStore(b.Context(), js, newNames(b))
		if err != nil {
			b.Fatal(err)
		}
		const batch = 5000
		for start := 0; start < n; start += batch {
			entries := make([]tape.Entry, min(batch, n-start))
			for i := range entries {
				entries[i] = benchEntry(start + i)
				if start+i == n-50 {
					entries[i] = tape.Anchor("handoff", map[string]any{"summary": "so far"})
				}
			}
			if _, err := s.Append(b.Context(), "bench", entries); err != nil {
				b.Fatal(err)
			}
		}
		tp := tape.New(s, "bench", tape.Context{})
		if _, err := tp.ReadMessages(b.Context()); err != nil { // warm up
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			for b.Loop() {
				msgs, err := tp.ReadMessages(b.Context())
				if err != nil || len(msgs) != 49 {
					b.Fatalf("%d messages, %v", len(msgs), err)
				}
			}
		})
	}
}

// BenchmarkAppend compares Append with raw js.PublishAsync of the same
// payloads (the limit): per op one batch, reported per entry.
func BenchmarkAppend(b *testing.B) {
	srv := natstest.Start(b)
	_, js := srv.JetStream(b)
	names := newNames(b)
	s, err := tape.NewJetStreamStore(b.Context(), js, names)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1, 100} {
		entries := make([]tape.Entry, size)
		for i := range entries {
			entries[i] = benchEntry(i)
		}
		b.Run(fmt.Sprintf("tape.Append/batch=%d", size), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Append(b.Context(), fmt.Sprintf("append-%d", size), entries); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/entry")
		})

		var raw [][]byte
		for _, e := range entries {
			var buf strings.Builder
			if err := tape.WriteJSONL(&buf, []tape.Entry{e}); err != nil {
				b.Fatal(err)
			}
			raw = append(raw, []byte(buf.String()))
		}
		subject := names.Tape(fmt.Sprintf("raw-%d", size))
		b.Run(fmt.Sprintf("js.PublishAsync/batch=%d", size), func(b *testing.B) {
			for b.Loop() {
				futures := make([]jetstream.PubAckFuture, len(raw))
				for i, data := range raw {
					if futures[i], err = js.PublishAsync(subject, data); err != nil {
						b.Fatal(err)
					}
				}
				for _, f := range futures {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/entry")
		})
	}
}
