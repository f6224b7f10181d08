package taperec

import (
	"reflect"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// TestRecorderBatchStripsMedia (failed before its fix): bub-behaviour.md §7.7 ForkTapeStore
// `append`: "first redact the payload IN PLACE — if it has content (else
// prompt) and that value is a list, keep only parts with type == "text"
// (images/audio never reach the tape)"; and doc.go of this package: the
// worker and the recorder "leave the same entries in both places".
//
// Sequence: a ChatFinished whose new user message is a multimodal prompt
// [text, image_url(data URL)] (what build_prompt returns for a message with
// an image, behaviour check 52). The same Map batch is applied (a) to a
// run's Fork, as the worker does, and (b) straight to the store, as
// internal/recorder/run.go commits it (store.Append of batch.Entries).
// Expected: in both, the user message content holds only the text part.
// Before the fix: only tape.Fork applies StripMedia; the recorder's commit keeps
// the image part (the base64 data URL reaches the persisted tape, is
// replayed to the model on every later turn, and the committed tape differs
// from what the run saw in its fork).
func TestRecorderBatchStripsMedia(t *testing.T) {
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prompt := llm.Content{Parts: []llm.Part{
		{Type: "text", Text: "what is this?"},
		{Type: "image_url", ImageURL: &llm.URLPart{URL: "data:image/png;base64,iVBORw0KGgo="}},
	}}
	answer := "a cat"
	b := Map(&events.ChatFinishedData{
		NewMessages:  []llm.Message{{Role: llm.RoleUser, Content: prompt}},
		ResponseText: &answer,
	}, "run-1", at)

	committed := tape.NewMemoryStore() // what the recorder writes to
	if err := b.Apply(ctx, committed, "s"); err != nil {
		t.Fatal(err)
	}
	fork := tape.NewFork(tape.NewMemoryStore()) // what the worker's run reads
	if err := b.Apply(ctx, fork, "s"); err != nil {
		t.Fatal(err)
	}
	userContent := func(entries []tape.Entry) any {
		for _, e := range entries {
			if e.Kind == tape.KindMessage && e.Payload["role"] == "user" {
				return e.Payload["content"]
			}
		}
		return nil
	}
	stored, err := committed.Fetch(ctx, "s", tape.All())
	if err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"type": "text", "text": "what is this?"}}
	if got := userContent(fork.Pending("s")); !reflect.DeepEqual(got, want) {
		t.Fatalf("fork: user content %#v, want %#v", got, want)
	}
	if got := userContent(stored); !reflect.DeepEqual(got, want) {
		t.Fatalf("committed tape: user content %#v, want %#v (the image reached the tape)", got, want)
	}
}
