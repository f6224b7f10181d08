package taperec

import (
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// BenchmarkApplyToFork is what a worker does with each event its run
// emits before the run next reads its tape: map it to tape entries and
// append them to the run's fork of the tape, here a chat.finished with a
// system prompt and two messages. A run's fork takes about a dozen such
// appends, so each fork here takes 16.
func BenchmarkApplyToFork(b *testing.B) {
	reply := "Hello! How can I help you today?"
	ev := &events.ChatFinished{
		Meta:         events.Meta{RunID: "run-1", SessionID: "http:alice"},
		SystemPrompt: strings.Repeat("You are a helpful assistant. ", 40),
		NewMessages: []llm.Message{
			{Role: llm.RoleUser, Content: llm.Text("hello, what can you do?")},
			{Role: llm.RoleAssistant, Content: llm.Text(reply)},
		},
		ResponseText: &reply,
	}
	parent := tape.NewMemoryStore()
	var fork *tape.Fork
	at := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%16 == 0 {
			fork = tape.NewFork(parent)
		}
		batch, err := MapEvent(ev, "run-1", at)
		if err != nil {
			b.Fatal(err)
		}
		if err := batch.Apply(b.Context(), fork, "http:alice"); err != nil {
			b.Fatal(err)
		}
	}
}
