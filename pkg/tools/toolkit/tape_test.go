package toolkit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

// memTape is the tools.Tape of a tape handle over a memory store.
type memTape struct{ t tape.Tape }

func (m memTape) Info(ctx context.Context) (tape.Info, error) { return m.t.Info(ctx) }
func (m memTape) Search(ctx context.Context, s tape.Search) (tape.SearchResult, error) {
	return m.t.Search(ctx, s)
}
func (m memTape) Anchors(ctx context.Context, n int) ([]tape.AnchorSummary, error) {
	return m.t.Anchors(ctx, n)
}
func (m memTape) Handoff(ctx context.Context, name string, st map[string]any) error {
	_, err := m.t.Handoff(ctx, name, st)
	return err
}
func (m memTape) Reset(ctx context.Context, archive bool) (string, error) {
	return m.t.Reset(ctx, archive)
}
func (m memTape) AppendEvent(ctx context.Context, name string, data map[string]any) error {
	_, err := m.t.AppendEvent(ctx, name, data)
	return err
}

func TestTapeToolsAndSwitchEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tp := memTape{tape.New(tape.NewMemoryStore(), "s", tape.Context{})}
	tc := &tools.Context{State: bub.NewState(nil), Tape: tp}
	call := func(name string, args map[string]any) string {
		t.Helper()
		tool, ok := e.reg.Get(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		out, err := tools.Invoke(ctx, tool, tc, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out.(string)
	}
	if got := call("tape.anchors", nil); got != "(no anchors)" {
		t.Fatalf("anchors = %q", got)
	}
	if got := call("tape.handoff", map[string]any{"name": "phase-1", "summary": "done"}); got != "anchor added: phase-1" {
		t.Fatalf("handoff = %q", got)
	}
	if got := call("tape.anchors", nil); got != "- phase-1" {
		t.Fatalf("anchors = %q", got)
	}
	if got := call("model", map[string]any{"model_id": "openai:gpt-4o"}); !strings.Contains(got, "Session model set to openai:gpt-4o") {
		t.Fatalf("model = %q", got)
	}
	if tc.State.String(bub.StateModel) != "openai:gpt-4o" {
		t.Fatal("state.model not set")
	}
	info := call("tape.info", nil)
	if !strings.Contains(info, "entries: 3") || !strings.Contains(info, "last_anchor: phase-1") {
		t.Fatalf("info:\n%s", info)
	}
	events, err := tp.t.Store().Fetch(ctx, "s", tape.All().Kinds(tape.KindEvent))
	if err != nil {
		t.Fatal(err)
	}
	if last := events[len(events)-1]; last.Payload["name"] != "model_switch" {
		t.Fatalf("no model_switch event: %+v", events)
	}
	if got := call("tape.reset", nil); got != "ok" {
		t.Fatalf("reset = %q", got)
	}
	tc.Tape = nil
	tool, _ := e.reg.Get("tape.info")
	if _, err := tools.Invoke(ctx, tool, tc, nil); err == nil || !strings.Contains(fmt.Sprint(err.Details), "tape unavailable") {
		t.Fatalf("tape.info without a tape: %v", err)
	}
}

func TestSubagentSession(t *testing.T) {
	for _, tc := range []struct{ arg, parent, want string }{
		{"inherit", "s1", "s1"},
		{"inherit", "", "temp/unknown"},
		{"custom:1", "s1", "custom:1"},
	} {
		if got := subagentSession(tc.arg, tc.parent); got != tc.want {
			t.Errorf("%q/%q: %q, want %q", tc.arg, tc.parent, got, tc.want)
		}
	}
	if got := subagentSession("temp", "s1"); !strings.HasPrefix(got, "temp/") || len(got) != len("temp/")+8 {
		t.Errorf("temp session %q", got)
	}
}
