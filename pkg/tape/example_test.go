package tape_test

import (
	"context"
	"fmt"
	"os"

	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// A turn: bootstrap the session, record one model interaction, and read the
// context the next turn gets.
func ExampleTape() {
	ctx := context.Background()
	t := tape.New(tape.NewMemoryStore(), "telegram:42", tape.Context{})
	if err := t.EnsureBootstrapAnchor(ctx); err != nil {
		panic(err)
	}
	reply := "Hello!"
	if _, err := t.Append(ctx, tape.ChatEntries(tape.ChatRecord{
		RunID:        "run-1",
		SystemPrompt: "You are Bub.",
		NewMessages:  []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}},
		ResponseText: &reply,
		Usage:        &llm.Usage{PromptTokens: 8, TotalTokens: 10, PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 3}},
	})...); err != nil {
		panic(err)
	}
	msgs, err := t.ReadMessages(ctx)
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.Content.Text)
	}
	info, err := t.Info(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(info)
	// Output:
	// user: hi
	// assistant: Hello!
	// name: telegram:42
	// entries: 6
	// anchors: 1
	// last_anchor: session/start
	// entries_since_last_anchor: 5
	// last_token_usage: 10
	// last_token_cache_hit_rate: 37.50%
}

// Queries are immutable values; Apply is what every store implements.
func ExampleQuery_Apply() {
	entries := []tape.Entry{
		{ID: 1, Kind: tape.KindMessage, Payload: map[string]any{"content": "old"}},
		{ID: 2, Kind: tape.KindAnchor, Payload: map[string]any{"name": "phase-1"}},
		{ID: 3, Kind: tape.KindMessage, Payload: map[string]any{"content": "new"}},
	}
	got, _ := tape.All().LastAnchor().Kinds(tape.KindMessage).Apply(entries)
	fmt.Println(len(got), got[0].Payload["content"])
	_, err := tape.All().AfterAnchor("phase-2").Apply(entries)
	fmt.Println(err)
	// Output:
	// 1 new
	// [not_found] Anchor 'phase-2' was not found.
}

// A worker reads and writes a run through a Fork; the parent store only
// changes when the recorder commits.
func ExampleFork() {
	ctx := context.Background()
	store := tape.NewMemoryStore()
	fork := tape.NewFork(store)
	t := tape.New(fork, "s", tape.Context{})
	if _, err := t.Handoff(ctx, "session/start", map[string]any{"owner": "human"}); err != nil {
		panic(err)
	}
	committed, _ := store.Fetch(ctx, "s", tape.All())
	fmt.Println(len(fork.Pending("s")), "pending,", len(committed), "committed")
	// Output: 2 pending, 0 committed
}

func ExampleWriteJSONL() {
	e := tape.Event("run", map[string]any{"status": "ok"}, map[string]any{"run_id": "r"})
	e.ID, e.Date = 7, "2026-05-14T10:11:12+00:00"
	if err := tape.WriteJSONL(os.Stdout, []tape.Entry{e}); err != nil {
		panic(err)
	}
	// Output: {"id": 7, "kind": "event", "payload": {"data": {"status": "ok"}, "name": "run"}, "meta": {"run_id": "r"}, "date": "2026-05-14T10:11:12+00:00"}
}
