package replay_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/providers"
	"github.com/bubbus/bub/pkg/replay"
	"github.com/bubbus/bub/pkg/tape"
)

// fixture is the session opsbot's test recorded through a real worker:
// a bash call that ran, and one that opsbot denied.
const fixture = "../../examples/plugins/opsbot/testdata/session.jsonl"

func fixtureEntries(t *testing.T) []tape.Entry {
	t.Helper()
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := tape.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// With --live-model the configured model answers (here the fake OpenAI
// server through the real SDK); when it asks for another tool than the
// recording did, the call is denied — no tool runs — the divergence is
// reported, and the turn still finishes.
func TestLiveModelDivergence(t *testing.T) {
	_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{{ID: "x1", Name: "fs_write", Arguments: json.RawMessage(`{"path":"a.txt","content":"hi"}`)}}},
		{Text: "It printed hello."},
	}})
	router, err := providers.NewRouter(llm.Config{Model: "openai:fake", APIBase: base, APIKey: "x"})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := replay.Turns(fixtureEntries(t))
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns %d, %v; want 2", len(turns), err)
	}
	ws := t.TempDir()
	r, err := replay.New(t.Context(), replay.Options{Models: router, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	res := r.Replay(t.Context(), "live", turns[0])
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := "step 1: this build called fs_write where the recording called bash (call 1); replay runs no tool"
	if len(res.Divergences) != 1 || res.Divergences[0] != want {
		t.Fatalf("divergences %q, want [%q]", res.Divergences, want)
	}
	if _, err := os.Stat(ws + "/a.txt"); err == nil {
		t.Fatal("replay ran fs.write")
	}
	if res.Identical() || res.Matches(replay.SectionTools) || !res.Matches(replay.SectionOutbound) {
		t.Fatalf("want only the tool calls to differ:\n%s", res.Diff())
	}
	d := res.Diff()
	for _, line := range []string{`-step 1 call bash {"cmd":"echo hello"}`, `+step 1 call fs_write {"content":"hi","path":"a.txt"}`} {
		if !strings.Contains(d, line) {
			t.Errorf("diff\n%s\nlacks %s", d, line)
		}
	}
}

// A recorded model call the current build does not make again, or one it
// makes that the recording lacks, is a divergence, not a crash: here the
// recording is cut after its first step.
func TestRecordingShorterThanTheRun(t *testing.T) {
	turns, err := replay.Turns(fixtureEntries(t))
	if err != nil {
		t.Fatal(err)
	}
	first := turns[0]
	cut := first
	cut.Entries = nil
	for _, e := range first.Entries { // the run up to its first step's end
		cut.Entries = append(cut.Entries, e)
		if name, _ := e.Payload["name"].(string); name == "loop.step" {
			break
		}
	}
	r, err := replay.New(t.Context(), replay.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	res := r.Replay(t.Context(), "cut", cut)
	want := "step 2: this build made a model call the recording does not have"
	if len(res.Divergences) != 1 || res.Divergences[0] != want || res.Identical() {
		t.Fatalf("divergences %q, want [%q]", res.Divergences, want)
	}
	var b strings.Builder
	if err := (replay.Report{Session: "cut", Results: []replay.Result{res}}).Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"divergence: " + want, "cut: 1 turns, 0 identical, 1 differ", "+run status error (error: " + want + ")"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report\n%s\nlacks %q", b.String(), s)
		}
	}
}

// Turns skips what is not an agent run (comma commands, entries without a
// run id) and keeps each run's context: the tape before it.
func TestTurns(t *testing.T) {
	entries := fixtureEntries(t)
	turns, err := replay.Turns(entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0].Prompt.PlainText() == "" || turns[0].Model != "openai:fake" {
		t.Fatalf("turns %+v", turns)
	}
	second := turns[1]
	if n := len(second.Context); n == 0 || entries[n].Meta["run_id"] != second.RunID {
		t.Fatalf("the second turn's context ends at %d, not where its run starts", n)
	}
	cmd := tape.Event("command", map[string]any{"raw": ",help"}, map[string]any{"run_id": "c1"})
	if more, _ := replay.Turns(append(entries, cmd)); len(more) != 2 {
		t.Fatalf("a comma command became a turn: %d turns", len(more))
	}
}

// FuzzTurns feeds arbitrary JSONL tapes through Turns and Lines: an
// error or an empty rendering, never a panic.
func FuzzTurns(f *testing.F) {
	b, err := os.ReadFile(fixture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"id":1,"kind":"event","payload":{"name":"loop.start","data":{"prompt":[{"type":"text"}],"allowed_tools":"x"}},"meta":{"run_id":"r"}}`))
	f.Add([]byte(`{"id":1,"kind":"tool_call","payload":{"calls":[1,{"function":[]}]},"meta":{"run_id":"r"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := tape.ReadJSONL(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		turns, err := replay.Turns(entries)
		if err != nil {
			return
		}
		for _, tr := range turns {
			_ = replay.Lines(tr.Entries)
		}
		_ = replay.Lines(entries)
	})
}
