package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/mcptest"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfChild() // the stdio MCP server of TestMCPToolsEndToEnd
	os.Exit(m.Run())
}

// mcpGuard denies every put tool in before_tool_call and records the
// tools after_tool_call sees.
type mcpGuard struct {
	mu    sync.Mutex
	after []string
}

func (*mcpGuard) Name() string { return "mcp-guard" }

func (*mcpGuard) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if strings.HasSuffix(in.Call.Tool, "_put") {
		return tools.Deny("put is not allowed here"), nil
	}
	return nil, nil
}

func (g *mcpGuard) AfterToolCall(_ context.Context, in hooks.AfterToolCallInput) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.after = append(g.after, in.Call.Tool+"="+tools.RenderResult(in.Result.Result))
	return nil
}

func (g *mcpGuard) saw(entry string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.after {
		if e == entry {
			return true
		}
	}
	return false
}

// mcpStep asks for one tool call on a user message containing match, then
// answers done to the agent's continuation prompt that follows the result.
func mcpStep(match, tool, args, done string) []fakellm.Step {
	return []fakellm.Step{
		{Match: match, ToolCalls: []fakellm.ToolCall{{Name: tool, Arguments: json.RawMessage(args)}}},
		{Match: "Continue the task", Text: done},
	}
}

// lastToolMessage returns the last tool message the model was sent.
func lastToolMessage(t *testing.T, c *stacktest.Cluster) string {
	t.Helper()
	reqs := c.LLM.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		for j := len(reqs[i].Messages) - 1; j >= 0; j-- {
			if m := reqs[i].Messages[j]; m.Role == llm.RoleTool {
				return m.Content.PlainText()
			}
		}
	}
	t.Fatal("the model was sent no tool message")
	return ""
}

// sessionEvents returns the data of every lifecycle event of session.
func sessionEvents(t *testing.T, c *stacktest.Cluster, session string) []string {
	t.Helper()
	ctx := t.Context()
	cons, err := c.Conn.JS.OrderedConsumer(ctx, c.Conn.Names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.Conn.Names.EventsOf(session)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for pending := int(info.NumPending); len(out) < pending; {
		batch, err := cons.Fetch(pending-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			out = append(out, msg.Subject()+" "+string(msg.Data()))
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestMCPToolsEndToEnd runs a worker on an embedded NATS with an MCP
// server, over stdio and over streamable HTTP: the model asks for the MCP
// tool and its result reaches the model and the tape, after_tool_call
// sees it; a comma command runs it; a before_tool_call denial stops it
// before the server; a killed server gives the model a tool error naming
// it, and once the server is back the tool works again. No env or header
// value reaches the model, the tape or the events.
func TestMCPToolsEndToEnd(t *testing.T) {
	const envSecret, headerSecret = "env-secret-e2e", "hdr-secret-e2e"
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			var (
				srv  mcptools.Server
				kill func()
				back func()
			)
			switch transport {
			case "stdio":
				srv = mcptest.Stdio(t, "local", envSecret)
				kill = func() {} // set once the pid is known
				back = func() { mcptest.Block(t, srv, false) }
			default:
				h := mcptest.StartHTTP(t, headerSecret)
				srv = h.Server("remote")
				kill = h.Stop
				back = func() { h.Restart(t) }
			}
			echo, put := "mcp_"+srv.Name+"_echo", "mcp_"+srv.Name+"_put"
			var steps []fakellm.Step
			steps = append(steps, mcpStep("please echo", echo, `{"text": "hello"}`, "echoed")...)
			steps = append(steps, mcpStep("please put", put, `{"key": "k", "value": "v"}`, "put refused")...)
			steps = append(steps, mcpStep("after the kill", echo, `{"text": "x"}`, "saw the error")...)
			guard := &mcpGuard{}
			c := stacktest.Start(t, stacktest.Options{Script: fakellm.Script{Steps: steps}, Plugins: []hooks.Plugin{guard}, MCP: []mcptools.Server{srv}})
			session := "mcp:" + transport
			turn := func(id, text string) string {
				t.Helper()
				outs := c.Turn(t, &envelope.Envelope{ID: id, Content: text, Channel: "test", SessionID: session})
				if len(outs) != 1 {
					t.Fatalf("%s: replies %+v", id, outs)
				}
				return outs[0].Content
			}

			// The model asks for the MCP tool; the result reaches the model.
			if reply := turn("mcp-1", "please echo"); reply != "echoed" {
				t.Errorf("reply %q", reply)
			}
			if got := lastToolMessage(t, c); !strings.Contains(got, "echo: hello") {
				t.Errorf("the model got the tool message %q, want the MCP result", got)
			}
			if !guard.saw(echo + "=echo: hello") {
				t.Errorf("after_tool_call saw %v", guard.after)
			}
			// The schema the model was offered is the server's.
			var offered bool
			for _, req := range c.LLM.Requests() {
				offered = offered || strings.Contains(string(req.Body), `"name":"`+echo+`"`) && strings.Contains(string(req.Body), "the text to echo")
			}
			if !offered {
				t.Error("the model was not offered the MCP tool with its schema")
			}

			// A comma command runs the MCP tool by its runtime name.
			if reply := turn("mcp-2", ",mcp."+srv.Name+"_echo text=comma"); !strings.Contains(reply, "echo: comma") {
				t.Errorf("comma command reply %q", reply)
			}

			// before_tool_call denies put: the server is never called.
			if reply := turn("mcp-3", "please put"); reply != "put refused" {
				t.Errorf("reply %q", reply)
			}
			if got := lastToolMessage(t, c); !strings.Contains(got, "put is not allowed here") || strings.Contains(got, "stored") {
				t.Errorf("the model got %q for the denied call", got)
			}

			// Kill the server: the model gets a tool error naming it.
			if transport == "stdio" {
				pid := turn("mcp-4", ",mcp.local_pid")
				mcptest.Block(t, srv, true) // restarts fail until back()
				kill = func() { mcptest.Kill(t, pid) }
			}
			kill()
			if reply := turn("mcp-5", "after the kill"); reply != "saw the error" {
				t.Errorf("reply %q", reply)
			}
			if got := lastToolMessage(t, c); !strings.Contains(got, "MCP server '"+srv.Name+"' is unavailable") {
				t.Errorf("the model got %q after the kill, want a tool error naming the server", got)
			}

			// The server comes back: the worker reconnects and the tool works.
			back()
			n := 0
			natstest.Eventually(t, 30*time.Second, func() (bool, string) {
				n++
				c.LLM.Enqueue(mcpStep(fmt.Sprintf("recover %d", n), echo, `{"text": "back"}`, "ok")...)
				turn(fmt.Sprintf("mcp-r%d", n), fmt.Sprintf("recover %d", n))
				got := lastToolMessage(t, c)
				return strings.Contains(got, "echo: back"), "the tool still answers " + got
			})

			// The tape holds the calls and results; no secret anywhere.
			entries := c.Tape(t, session)
			var calls, results int
			for _, e := range entries {
				data, _ := json.Marshal(e.Payload)
				switch {
				case e.Kind == tape.KindToolCall && strings.Contains(string(data), echo):
					calls++
				case e.Kind == tape.KindToolResult && strings.Contains(string(data), "echo: hello"):
					results++
				}
			}
			if calls == 0 || results != 1 {
				t.Errorf("tape: %d echo calls, %d results with the MCP answer", calls, results)
			}
			events := sessionEvents(t, c, session)
			var finished bool
			for _, ev := range events {
				finished = finished || strings.Contains(ev, "tool_call.finished") && strings.Contains(ev, "echo: hello")
			}
			if !finished {
				t.Errorf("no tool_call.finished event carries the MCP result among %d events", len(events))
			}
			everything, _ := json.Marshal(entries)
			everything = append(everything, strings.Join(events, "\n")...)
			for _, req := range c.LLM.Requests() {
				everything = append(everything, req.Body...)
			}
			for _, secret := range []string{envSecret, headerSecret} {
				if strings.Contains(string(everything), secret) {
					t.Errorf("the tape, an event or a model request shows the secret %q", secret)
				}
			}
		})
	}
}
