package opsbot_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbus/bub/examples/plugins/opsbot"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/replay"
	"github.com/bubbus/bub/pkg/replay/replaytest"
	"github.com/bubbus/bub/pkg/tape"
)

var update = flag.Bool("update", false, "write the session recorded by TestRecordedSessionReplays to testdata/session.jsonl")

const fixture = "testdata/session.jsonl"

// record runs two turns through a real worker with opsbot (the default
// deny list) against the fake model: one shell command that runs, one
// that opsbot denies. It returns the session's tape as the recorder wrote
// it.
func record(t *testing.T) []tape.Entry {
	script := fakellm.Script{Steps: []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"echo hello"}`)}}},
		{Text: "It printed hello."},
		{ToolCalls: []fakellm.ToolCall{{ID: "call_2", Name: "bash", Arguments: json.RawMessage(`{"cmd":"rm -rf /tmp/opsbot-replay"}`)}}},
		{Text: "I was not allowed to clean up."},
	}}
	c := stacktest.Start(t, stacktest.Options{Script: script, Plugins: []hooks.Plugin{opsbot.New(opsbot.Config{Deny: opsbot.DefaultDeny})}})
	const session = "ops:replay"
	for i, msg := range []string{"say hello", "clean up /tmp/opsbot-replay"} {
		outs := c.Turn(t, &envelope.Envelope{ID: "replay-" + string(rune('1'+i)), Content: msg, Channel: "test", SessionID: session})
		if len(outs) != 1 {
			t.Fatalf("turn %d: replies %+v", i+1, outs)
		}
	}
	return c.Tape(t, session)
}

// A session recorded by a real worker replays identically with the plugin
// it was recorded with: same outbound text, tool calls and decisions.
// With -update the recording becomes testdata/session.jsonl.
func TestRecordedSessionReplays(t *testing.T) {
	entries := record(t)
	rep, err := replay.Session(t.Context(), "ops:replay", entries, replay.Options{
		Plugins: []hooks.Plugin{opsbot.New(opsbot.Config{Deny: opsbot.DefaultDeny})}, Workspace: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || !rep.Identical() {
		t.Fatalf("the fresh recording does not replay identically:\n%s", b.String())
	}
	if !strings.Contains(lineTexts(rep.Results[1].Recorded), "before_tool_call opsbot deny") {
		t.Fatalf("the second turn recorded no deny decision: %q", lineTexts(rep.Results[1].Recorded))
	}
	if *update {
		f, err := os.Create(filepath.FromSlash(fixture))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := tape.WriteJSONL(f, entries); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayProductionTape is what a plugin author writes: the recorded
// session (here testdata/session.jsonl; in production, `bub tape export
// SESSION`) must replay identically through the plugin as it is now.
func TestReplayProductionTape(t *testing.T) {
	replaytest.Run(t, fixture, opsbot.New(opsbot.Config{Deny: opsbot.DefaultDeny}))
}

// A policy change shows up as the decision it changed: without "rm -rf"
// on the deny list the second turn's call is no longer denied, and the
// diff says so; the first turn still matches.
func TestReplayShowsAPolicyChange(t *testing.T) {
	rep, err := replay.File(t.Context(), fixture, replay.Options{Plugins: []hooks.Plugin{opsbot.New(opsbot.Config{Deny: []string{"mkfs"}})}, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d turns, want 2", len(rep.Results))
	}
	if first := rep.Results[0]; !first.Identical() {
		t.Fatalf("the first turn differs:\n%s", first.Diff())
	}
	second := rep.Results[1]
	if second.Matches(replay.SectionDecisions) || !second.Matches(replay.SectionOutbound) || !second.Matches(replay.SectionTools) {
		t.Fatalf("want only the decisions to differ:\n%s", second.Diff())
	}
	want := `-step 1 before_tool_call opsbot deny {"message":"opsbot policy: commands containing \"rm -rf\" are not allowed"}`
	if d := second.Diff(); !strings.Contains(d, want) {
		t.Fatalf("diff\n%s\nwant a line %s", d, want)
	}
}

func lineTexts(ls []replay.Line) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}
