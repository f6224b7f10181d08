package taperec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
)

// FuzzMap feeds arbitrary structured CloudEvents through what the
// recorder does with each (events.Decode, events.DecodePayload, Check,
// Map, Batch.Apply): nothing may panic, and a store takes every batch
// Check passes.
func FuzzMap(f *testing.F) {
	examples, err := filepath.Glob(filepath.Join("../../docs/events", "*.example.json"))
	if err != nil || len(examples) == 0 {
		f.Fatalf("no golden examples: %v", err)
	}
	for _, path := range examples {
		body, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	header := map[string][]string{"Content-Type": {events.ContentTypeStructured}}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := events.Decode(header, body)
		if err != nil {
			return
		}
		payload, err := events.DecodePayload(ev)
		if err != nil || Check(payload) != nil {
			return
		}
		b := Map(payload, events.RunID(ev), ev.Time())
		if err := b.Apply(t.Context(), tape.NewMemoryStore(), "fuzz"); err != nil {
			t.Fatalf("the batch of %s: %v", body, err)
		}
	})
}
