package tape_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/tape"
)

// TestToolResultPairingKeepsEveryCallObject (failed before its fix): bub-behaviour.md §7.5,
// default selector: "tool_call → {role:"assistant", content:"",
// tool_calls:[calls]} if calls non-empty; remember calls as pending" and
// "result i gets tool_call_id and name from pending call i when present and
// non-empty". Python's _normalize_tool_calls keeps EVERY dict in calls (it
// only drops non-dicts), so pending call i is the i-th object of the entry.
//
// Sequence: a tool_call entry (as a Python tape may hold it, e.g. imported)
// with two call objects, the first one's arguments being a JSON object
// instead of a string; then a tool_result with two results.
// Expected: result 0 pairs with call "a"/"first", result 1 with call
// "b"/"second". Before the fix: toolCallsOf dropped the call that does not decode
// into llm.ToolCall, so result 0 is paired with "b"/"second" and result 1
// gets no id — the model sees a tool message answering the wrong call.
func TestToolResultPairingKeepsEveryCallObject(t *testing.T) {
	calls := []map[string]any{
		{"id": "a", "type": "function", "function": map[string]any{"name": "first", "arguments": map[string]any{"x": 1}}},
		{"id": "b", "type": "function", "function": map[string]any{"name": "second", "arguments": "{}"}},
	}
	tp := newTape(t, tape.Context{Anchor: tape.FromStart()},
		tape.ToolCalls(calls),
		tape.ToolResults([]any{"result of a", "result of b"}),
	)
	msgs, err := tp.ReadMessages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var tools [][2]string
	ncalls := -1
	for _, m := range msgs {
		if m.Role == "assistant" {
			ncalls = len(m.ToolCalls)
		}
		if m.Role == "tool" {
			tools = append(tools, [2]string{m.ToolCallID, m.Name})
		}
	}
	want := [][2]string{{"a", "first"}, {"b", "second"}}
	if ncalls != 2 || len(tools) != 2 || tools[0] != want[0] || tools[1] != want[1] {
		t.Fatalf("assistant message carries %d tool calls, tool messages (id, name) = %v; want 2 calls and %v", ncalls, tools, want)
	}
}

// TestReadJSONLKeepsPythonNonFiniteFloats (failed before its fix): bub-behaviour.md §7.7,
// FileTapeStore: "bad JSON and invalid records ... are skipped". Python's
// json.dumps writes NaN/Infinity/-Infinity by default (allow_nan=True) and
// json.loads reads them back, so such a line in a Python tape is valid JSON
// to Bub and its entry is kept. `bub tape import` promises "Python Bub's
// format too".
//
// Sequence: ReadJSONL of three Python-written lines, the second holding a
// NaN in its payload (e.g. a usage/cost value).
// Expected: three entries (the non-finite value kept as something, e.g.
// null). Before the fix: the middle entry was silently dropped — an entry of the
// imported tape is lost and ids get a hole.
func TestReadJSONLKeepsPythonNonFiniteFloats(t *testing.T) {
	input := strings.Join([]string{
		`{"id": 1, "kind": "message", "payload": {"role": "user", "content": "hi"}, "meta": {}, "date": "2026-01-01T00:00:00+00:00"}`,
		`{"id": 2, "kind": "event", "payload": {"name": "run", "data": {"cost": NaN, "ratio": Infinity, "low": -Infinity}}, "meta": {}, "date": "2026-01-01T00:00:01+00:00"}`,
		`{"id": 3, "kind": "message", "payload": {"role": "assistant", "content": "ok"}, "meta": {}, "date": "2026-01-01T00:00:02+00:00"}`,
	}, "\n") + "\n"
	got, err := tape.ReadJSONL(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if len(got) != 3 {
		t.Fatalf("imported ids %v, want [1 2 3] (Python reads the NaN line)", ids)
	}
}

// TestAnchorsNegativeLimitDoesNotPanic (failed before its fix): bub-behaviour.md §7.4
// "anchors(limit=20) → last N anchors"; Python slices entries[-limit:],
// which never raises (limit -1 gives every anchor but the first).
// Tape.Anchors is reachable with any limit through the tools.TapeWriter
// interface (internal/worker runTape.Anchors passes it through).
//
// Sequence: a tape with anchors a, b, c; Anchors(ctx, -1).
// Expected: no panic ([b c] as in Python, or an error). Before the fix:
// entries[max(0, len-limit):] = entries[4:] on 3 entries panics with
// "slice bounds out of range", taking the worker goroutine down.
func TestAnchorsNegativeLimitDoesNotPanic(t *testing.T) {
	tp := newTape(t, tape.Context{}, tape.Anchor("a", nil), tape.Anchor("b", nil), tape.Anchor("c", nil))
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Anchors(ctx, -1) panicked: %v", r)
		}
	}()
	// Python's entries[-limit:] for each limit.
	for limit, want := range map[int][]string{-1: {"b", "c"}, -5: {}, 0: {"a", "b", "c"}, 2: {"b", "c"}, 5: {"a", "b", "c"}} {
		got, err := tp.Anchors(t.Context(), limit)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, a := range got {
			names = append(names, a.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("Anchors(ctx, %d) = %v, want %v", limit, names, want)
		}
	}
}
