package tapetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/tape"
)

// The context-read benchmark: package tape's `go test -bench` and figure
// P5 of `bub bench` (through testing.Benchmark) fill their tapes and read
// them with these same functions. The cost must not grow with the tape: a
// 100k-entry tape may take at most twice the time of a 100-entry one.

// BenchEntry is entry i of a benchmark tape: a typical chat entry of
// about 300 bytes.
func BenchEntry(i int) tape.Entry {
	return tape.MessageEntry(map[string]any{
		"role":    "user",
		"content": fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum dolor sit amet ", 8)),
	}, map[string]any{"run_id": fmt.Sprintf("run-%d", i/10)})
}

// FillBenchTape appends n entries to session in batches of 5,000, the one
// 50 from the end an anchor, and calls progress (when set) with the count
// written after each batch.
func FillBenchTape(ctx context.Context, s tape.Store, session string, n int, progress func(done int)) error {
	const batch = 5000
	for start := 0; start < n; start += batch {
		entries := make([]tape.Entry, min(batch, n-start))
		for i := range entries {
			entries[i] = BenchEntry(start + i)
			if start+i == n-50 {
				entries[i] = tape.Anchor("handoff", map[string]any{"summary": "so far"})
			}
		}
		if _, err := s.Append(ctx, session, entries); err != nil {
			return err
		}
		if progress != nil {
			progress(start + len(entries))
		}
	}
	return nil
}

// ReadMessagesBenchmark returns the benchmark that reads tp's default
// context: the 49 messages after the anchor [FillBenchTape] wrote.
func ReadMessagesBenchmark(tp tape.Tape) func(*testing.B) {
	return func(b *testing.B) {
		for b.Loop() {
			msgs, err := tp.ReadMessages(b.Context())
			if err != nil || len(msgs) != 49 {
				b.Fatalf("%d messages, %v", len(msgs), err)
			}
		}
	}
}
