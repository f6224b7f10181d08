package tape_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tape/tapetest"
)

// BenchmarkReadMessages reads the default context (after the last anchor,
// which is 50 entries back) of a small and of a large JetStream tape,
// from the stream each time (cache=off) and with the store's entry cache
// (cache=on: a session's next turn on the same worker). The cost must not
// grow with the tape: the large tape may be at most 2x the small one.
// `bub bench` (P5) runs the same fill and the cache=off read (tapetest).
func BenchmarkReadMessages(b *testing.B) {
	srv := natstest.Start(b)
	_, js := srv.JetStream(b)
	for _, n := range []int{100, 100_000} {
		names := newNames(b)
		s, err := tape.NewJetStreamStore(b.Context(), js, names)
		if err != nil {
			b.Fatal(err)
		}
		if err := tapetest.FillBenchTape(b.Context(), s, "bench", n, nil); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			label string
			bytes int
		}{{"off", 0}, {"on", 8 << 20}} {
			s, err := tape.NewJetStreamStore(b.Context(), js, names, tape.WithEntryCache(c.bytes))
			if err != nil {
				b.Fatal(err)
			}
			tp := tape.New(s, "bench", tape.Context{})
			if _, err := tp.ReadMessages(b.Context()); err != nil { // warm up
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("entries=%d/cache=%s", n, c.label), tapetest.ReadMessagesBenchmark(tp))
		}
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
			entries[i] = tapetest.BenchEntry(i)
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
