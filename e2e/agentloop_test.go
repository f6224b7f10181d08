package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestToolCallThroughThePipeline: the fake model asks for fs.read of a
// workspace file, then answers. The reply arrives over HTTP, the run's
// events reach NATS in order, the tool result reached the model, and the
// tape holds the tool call and its result.
func TestToolCallThroughThePipeline(t *testing.T) {
	srv := natstest.Start(t)
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "fs_read", Arguments: json.RawMessage(`{"path": "notes.txt"}`)}}},
		{Text: "The note says bananas are yellow."},
	}})
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("bananas are yellow\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x"}
	seen := recordTypes(t, srv.URL, "tools")
	httpAddr := freeAddr(t)
	start(t, "recorder", env)
	start(t, "worker", env, "--workspace", ws)
	start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)

	status, r := post(t, web, map[string]any{"content": "read my notes", "session_id": "tools"}, "30s")
	if status != 200 || len(r.Outbounds) != 1 || r.Outbounds[0].Content != "The note says bananas are yellow." {
		t.Fatalf("reply: %d %+v", status, r)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2", len(reqs))
	}
	last := reqs[1].Messages
	var toolMsg *llm.Message
	for i := range last {
		if last[i].Role == llm.RoleTool {
			toolMsg = &last[i]
		}
	}
	if toolMsg == nil || toolMsg.ToolCallID != "call_1" || !strings.Contains(toolMsg.Content.PlainText(), "bananas are yellow") {
		t.Fatalf("the tool result did not reach the model: %+v", last)
	}

	want := []string{events.TypeRunStarted, events.TypeStepStarted, events.TypeLLMCallStarted, events.TypeLLMCallFinished,
		events.TypeToolCallStarted, events.TypeToolCallFinish, events.TypeChatFinished, events.TypeStepFinished,
		events.TypeStepStarted, events.TypeLLMCallStarted, events.TypeLLMCallFinished, events.TypeChatFinished,
		events.TypeStepFinished, events.TypeRunFinished}
	eventually(t, 10*time.Second, func() (bool, string) {
		got := seen.types()
		return isSubsequence(want, got), fmt.Sprintf("events %v lack, in order, %v", got, want)
	})
	waitTape(t, srv.URL, "tools", 3)
	out := run(t, "bub", nil, "tape", "show", "--json", "--nats", srv.URL, "tools")
	if !strings.Contains(out, `"kind": "tool_call"`) || !strings.Contains(out, `"kind": "tool_result"`) || !strings.Contains(out, "bananas are yellow") {
		t.Fatalf("tape lacks the tool call and its result:\n%s", out)
	}
}

// typeWatch records the event types of one session in arrival order and
// checks the seq extension grows within each run.
type typeWatch struct {
	mu    sync.Mutex
	order []string
	bad   []string
	seq   map[string]int64
}

func recordTypes(t *testing.T, url, session string) *typeWatch {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &typeWatch{seq: map[string]int64{}}
	_, err = nc.Subscribe(subjects.Default().EventsOf(session), func(m *nats.Msg) {
		ev, err := events.FromMsg(m)
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.bad = append(w.bad, err.Error())
			return
		}
		run, seq := events.RunID(ev), events.Seq(ev)
		if seq > 0 {
			if seq <= w.seq[run] {
				w.bad = append(w.bad, fmt.Sprintf("run %s: seq %d after %d", run, seq, w.seq[run]))
			}
			w.seq[run] = seq
		}
		w.order = append(w.order, ev.Type())
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.bad) > 0 {
			t.Errorf("event order problems: %v", w.bad)
		}
	})
	return w
}

func (w *typeWatch) types() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.order...)
}

// isSubsequence reports whether want appears in got in order.
func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestChatStreamsDeltasBeforeTheTurnEnds drives `bub chat` through its
// standard input against a slow streaming model: the first words of the
// answer are printed while the model is still streaming the rest.
func TestChatStreamsDeltasBeforeTheTurnEnds(t *testing.T) {
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Text: "alpha beta gamma delta epsilon", Chunks: 5, ChunkDelay: fakellm.Duration(300 * time.Millisecond)},
	}})
	cmd, stdin, stdout := startChat(t, []string{"BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x"}, "--home", t.TempDir())
	if _, err := io.WriteString(stdin, "tell me five words\n"); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	buf := make([]byte, 256)
	for !strings.Contains(got.String(), "alpha") {
		n, err := stdout.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("reading chat output: %v (so far %q)", err, got.String())
		}
	}
	if strings.Contains(got.String(), "epsilon") {
		t.Fatalf("the whole answer arrived at once: %q", got.String())
	}
	if fake.Pending() != 0 || len(fake.Requests()) != 1 {
		t.Fatalf("unexpected model traffic: pending %d, requests %d", fake.Pending(), len(fake.Requests()))
	}
	if _, err := io.WriteString(stdin, ",quit\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(stdout)
	if !strings.Contains(got.String()+string(out), "epsilon") {
		t.Fatalf("the answer never completed: %q", got.String()+string(out))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bub chat: %v", err)
	}
}
