package tape_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

func user(text string) tape.Entry {
	return tape.MessageEntry(map[string]any{"role": "user", "content": text})
}

func newTape(t *testing.T, c tape.Context, entries ...tape.Entry) tape.Tape {
	t.Helper()
	tp := tape.New(tape.NewMemoryStore(), "t", c)
	if len(entries) > 0 {
		if _, err := tp.Append(t.Context(), entries...); err != nil {
			t.Fatal(err)
		}
	}
	return tp
}

func TestDefaultSelector(t *testing.T) {
	calls := []llm.ToolCall{
		{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "fs_read", Arguments: "{}"}},
		{ID: "", Type: "function", Function: llm.FunctionCall{Name: "", Arguments: "{}"}},
	}
	entries := []tape.Entry{
		tape.System("ignored"),
		tape.Anchor("phase-1", map[string]any{"summary": "café", "n": 1}),
		tape.Anchor("bare", nil),
		user("hello"),
		tape.ToolCalls(calls),
		tape.ToolResults([]any{"text result", map[string]any{"kind": "tool", "message": "ü"}, 3}),
		tape.ToolResults([]any{"orphan"}),
		tape.ToolCalls([]llm.ToolCall{}),
		tape.Event("run", nil),
		tape.ErrorEntry(bub.Errorf(bub.KindTool, "x")),
	}
	// Round-trip through a store so payloads hold JSON values.
	tp := newTape(t, tape.Context{Anchor: tape.FromStart()}, entries...)
	got, err := tp.ReadMessages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Message{
		{Role: "assistant", Content: llm.Text(`[Anchor created: phase-1]: {"n": 1, "summary": "café"}`)},
		{Role: "assistant", Content: llm.Text(`[Anchor created: bare]: null`)},
		{Role: "user", Content: llm.Text("hello")},
		{Role: "assistant", Content: llm.Text(""), ToolCalls: calls},
		{Role: "tool", Content: llm.Text("text result"), ToolCallID: "c1", Name: "fs_read"},
		{Role: "tool", Content: llm.Text(`{"kind": "tool", "message": "ü"}`)},
		{Role: "tool", Content: llm.Text("3")},
		{Role: "tool", Content: llm.Text("orphan")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

func TestReadMessagesContexts(t *testing.T) {
	entries := []tape.Entry{
		user("one"),
		tape.Anchor("a", nil),
		user("two"),
		tape.Anchor("b", nil),
		user("three"),
		tape.Event("hidden", map[string]any{}, map[string]any{"context": false}),
		tape.MessageEntry(map[string]any{"role": "user", "content": "hidden"}, map[string]any{"context": false}),
	}
	texts := func(msgs []llm.Message) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.Content.PlainText())
		}
		return out
	}
	tests := []struct {
		name   string
		anchor tape.ContextAnchor
		want   []string
	}{
		{"last anchor (default)", tape.ContextAnchor{}, []string{"three"}},
		{"last anchor", tape.FromLastAnchor(), []string{"three"}},
		{"named", tape.FromAnchor("a"), []string{"two", "[Anchor created: b]: null", "three"}},
		{"empty name is the whole tape", tape.FromAnchor(""), []string{"one", "[Anchor created: a]: null", "two", "[Anchor created: b]: null", "three"}},
		{"whole tape", tape.FromStart(), []string{"one", "[Anchor created: a]: null", "two", "[Anchor created: b]: null", "three"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newTape(t, tape.Context{Anchor: tt.anchor}, entries...).ReadMessages(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if g := texts(got); !reflect.DeepEqual(g, tt.want) {
				t.Fatalf("got %q, want %q", g, tt.want)
			}
		})
	}

	// Behaviour check 70: a custom selector never sees context:false entries.
	var seen []tape.Entry
	state := bub.NewState(map[string]any{"session_id": "s"})
	c := tape.Context{Anchor: tape.FromStart(), State: state, Select: func(ctx context.Context, es []tape.Entry, c tape.Context) ([]llm.Message, error) {
		seen = es
		if c.State != state {
			t.Error("selector did not get the context's state")
		}
		return []llm.Message{{Role: "user", Content: llm.Text("custom")}}, nil
	}}
	got, err := newTape(t, c, entries...).ReadMessages(t.Context())
	if err != nil || len(got) != 1 || got[0].Content.Text != "custom" {
		t.Fatalf("custom selector result %v, %v", got, err)
	}
	if len(seen) != 5 {
		t.Fatalf("selector saw %d entries, want the 5 in context", len(seen))
	}

	_, err = newTape(t, tape.Context{}, user("x")).ReadMessages(t.Context())
	var be *bub.Error
	if !errors.As(err, &be) || be.Message != "No anchors found in tape." {
		t.Fatalf("default context without anchors: %v", err)
	}
}

func runEvent(usage any) tape.Entry {
	data := map[string]any{"status": "ok"}
	if usage != nil {
		data["usage"] = usage
	}
	return tape.Event("run", data)
}

func TestInfo(t *testing.T) {
	tests := []struct {
		name    string
		entries []tape.Entry
		want    string
	}{
		{"empty", nil, "name: t\nentries: 0\nanchors: 0\nlast_anchor: None\nentries_since_last_anchor: 0\nlast_token_usage: None\nlast_token_cache_hit_rate: None"},
		{"cache hit rate (check 59)", []tape.Entry{
			tape.Anchor("a", nil), user("x"),
			runEvent(map[string]any{"prompt_tokens": 8, "total_tokens": 12, "prompt_tokens_details": map[string]any{"cached_tokens": 3}}),
		}, "name: t\nentries: 3\nanchors: 1\nlast_anchor: a\nentries_since_last_anchor: 2\nlast_token_usage: 12\nlast_token_cache_hit_rate: 37.50%"},
		{"newest usable run event wins", []tape.Entry{
			runEvent(map[string]any{"total_tokens": 5, "prompt_tokens": 0}),
			runEvent(map[string]any{"total_tokens": true}),
			runEvent(map[string]any{"total_tokens": 1.5}),
			runEvent(nil),
			tape.Event("other", map[string]any{"usage": map[string]any{"total_tokens": 99}}),
		}, "name: t\nentries: 5\nanchors: 0\nlast_anchor: None\nentries_since_last_anchor: 5\nlast_token_usage: 5\nlast_token_cache_hit_rate: None"},
		{"usage before the last anchor", []tape.Entry{
			runEvent(map[string]any{"total_tokens": 7, "prompt_tokens": 4, "prompt_tokens_details": map[string]any{"cached_tokens": 4}}),
			tape.Anchor("a", nil), tape.Anchor("b", nil), user("x"),
		}, "name: t\nentries: 4\nanchors: 2\nlast_anchor: b\nentries_since_last_anchor: 1\nlast_token_usage: 7\nlast_token_cache_hit_rate: 100.00%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := newTape(t, tape.Context{}, tt.entries...).Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if info.String() != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", info, tt.want)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	tp := newTape(t, tape.Context{},
		tape.Anchor("a", map[string]any{"summary": "s"}),
		tape.Entry{Kind: tape.KindAnchor, Payload: map[string]any{}},
		tape.Entry{Kind: tape.KindAnchor, Payload: map[string]any{"name": 5, "state": "not a map"}},
		tape.Anchor("d", nil),
	)
	got, err := tp.Anchors(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []tape.AnchorSummary{{Name: "-", State: map[string]any{}}, {Name: "5", State: map[string]any{}}, {Name: "d", State: map[string]any{}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if all, _ := tp.Anchors(t.Context(), 20); len(all) != 4 || all[0].State["summary"] != "s" {
		t.Fatalf("Anchors(20) = %#v", all)
	}
}

func TestSearch(t *testing.T) {
	entries := []tape.Entry{
		user("deploy the Café service"),
		tape.ToolResults([]any{"deploy failed: disk full"}),
		user("deploy the Café service"), // duplicate payload
		tape.Event("deploy", map[string]any{}),
		tape.MessageEntry(map[string]any{"role": "tool", "content": "[tape.search]: 2 matches (0 filtered)\ndeploy"}),
		user("unrelated"),
		tape.MessageEntry(map[string]any{"role": "user", "content": "x"}, map[string]any{"note": "deploy"}),
	}
	for i := range entries {
		entries[i].Date = "2024-01-0" + string(rune('1'+i)) + "T00:00:00+00:00"
	}
	tp := newTape(t, tape.Context{}, entries...)
	search := func(s tape.Search) tape.SearchResult {
		t.Helper()
		r, err := tp.Search(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := search(tape.Search{Query: "DEPLOY"})
	if got := ids(r.Entries); !reflect.DeepEqual(got, []int64{3, 2}) || r.Filtered != 1 {
		t.Fatalf("ids %v filtered %d: want newest first, deduped, the earlier search output filtered", got, r.Filtered)
	}
	want := "[tape.search]: 2 matches (1 filtered)\n" +
		`{"date": "2024-01-03T00:00:00+00:00", "content": {"content": "deploy the Café service", "role": "user"}}` + "\n" +
		`{"date": "2024-01-02T00:00:00+00:00", "content": {"results": ["deploy failed: disk full"]}}`
	if r.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", r, want)
	}

	tests := []struct {
		name string
		s    tape.Search
		want []int64
	}{
		{"limit counts filtered entries, as in Bub", tape.Search{Query: "deploy", Limit: 2}, []int64{3}},
		{"kinds", tape.Search{Query: "deploy", Kinds: []string{tape.KindEvent}}, []int64{4}},
		{"non-ASCII", tape.Search{Query: "café"}, []int64{3}},
		{"dates", tape.Search{Query: "deploy", Start: "2024-01-01", End: "2024-01-02"}, []int64{2, 1}},
		{"empty query lists oldest first", tape.Search{Limit: 2}, []int64{1, 2}},
		{"blank query finds nothing", tape.Search{Query: "  "}, nil},
		{"meta-only match is dropped", tape.Search{Query: "note"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(search(tt.s).Entries); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ids %v, want %v", got, tt.want)
			}
		})
	}
	_, err := tp.Search(t.Context(), tape.Search{Query: "x", Start: "2024-01-01"})
	var be *bub.Error
	if !errors.As(err, &be) || be.Message != "Invalid ISO date or datetime: ''." {
		t.Fatalf("search with only a start date: %v", err)
	}
}

func ids(entries []tape.Entry) []int64 {
	var out []int64
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

func TestHandoffAndEvents(t *testing.T) {
	tp := newTape(t, tape.Context{})
	got, err := tp.Handoff(t.Context(), "phase-1", map[string]any{"summary": "done"}, map[string]any{"run_id": "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != tape.KindAnchor || got[1].Payload["name"] != "handoff" ||
		!reflect.DeepEqual(got[1].Payload["data"], map[string]any{"name": "phase-1", "state": map[string]any{"summary": "done"}}) ||
		got[0].Meta["run_id"] != "r" || got[1].Meta["run_id"] != "r" {
		t.Fatalf("handoff entries %#v", got)
	}
	got, err = tp.Handoff(t.Context(), "bare", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, has := got[0].Payload["state"]; has || !reflect.DeepEqual(got[1].Payload["data"], map[string]any{"name": "bare", "state": map[string]any{}}) {
		t.Fatalf("handoff without state %#v", got)
	}
	e, err := tp.AppendEvent(t.Context(), "order.reviewed", nil, map[string]any{"context": false})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != 5 || !reflect.DeepEqual(e.Payload, map[string]any{"name": "order.reviewed", "data": map[string]any{}}) || e.InContext() {
		t.Fatalf("event %#v", e)
	}
	msgs, err := tp.ReadMessages(t.Context())
	if err != nil || len(msgs) != 0 {
		t.Fatalf("context after a handoff: %v, %v (the anchor itself is excluded)", msgs, err)
	}
}

func TestEnsureBootstrapAnchor(t *testing.T) {
	tp := newTape(t, tape.Context{}, user("before"))
	for range 2 {
		if err := tp.EnsureBootstrapAnchor(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	anchors, err := tp.Anchors(t.Context(), 20)
	if err != nil || len(anchors) != 1 || anchors[0].Name != "session/start" || anchors[0].State["owner"] != "human" {
		t.Fatalf("anchors %#v, %v", anchors, err)
	}
}

func TestReset(t *testing.T) {
	tp := newTape(t, tape.Context{}, user("old"))
	out, err := tp.Reset(t.Context(), false)
	if err != nil || out != "ok" {
		t.Fatalf("Reset = %q, %v", out, err)
	}
	entries, err := tp.Store().Fetch(t.Context(), "t", tape.All())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].ID != 1 || !reflect.DeepEqual(entries[0].Payload["state"], map[string]any{"owner": "human"}) {
		t.Fatalf("tape after reset %#v", entries)
	}

	out, err = tp.Reset(t.Context(), true)
	loc, ok := strings.CutPrefix(out, "Archived: ")
	if err != nil || !ok {
		t.Fatalf("Reset(archive) = %q, %v", out, err)
	}
	archived, err := tp.Store().(tape.Archiver).ReadArchive(t.Context(), loc)
	if err != nil || len(archived) != 2 {
		t.Fatalf("archive %q: %d entries, %v", loc, len(archived), err)
	}

	noArchive := tape.New(struct{ tape.Store }{tape.NewMemoryStore()}, "t", tape.Context{})
	if _, err := noArchive.Reset(t.Context(), true); !errors.Is(err, tape.ErrNoArchive) {
		t.Fatalf("archive on a store without Archiver: %v", err)
	}
}

func TestTapeAccessors(t *testing.T) {
	s := tape.NewMemoryStore()
	c := tape.Context{Anchor: tape.FromStart()}
	tp := tape.New(s, "name", tape.Context{}).WithContext(c)
	if tp.Name() != "name" || tp.Store() != s {
		t.Fatal("accessors")
	}
	if got, err := tp.Context().Query().Apply([]tape.Entry{tape.Anchor("a", nil), user("x")}); err != nil || len(got) != 2 {
		t.Fatalf("WithContext did not replace the context: %v, %v", got, err)
	}
}
