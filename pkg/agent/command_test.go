package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

// commandTools are a visible and a hidden tool for comma commands.
func commandTools(calls *countCalls) []tools.Tool {
	greet := tool("greet", stringParams("name"), func(_ context.Context, tc *tools.Context, args map[string]any) (any, error) {
		calls.add(args)
		return "hello " + args["name"].(string) + " from " + tc.RunID, nil
	})
	hidden := tool("secret.cmd", nil, func(context.Context, *tools.Context, map[string]any) (any, error) {
		calls.add(nil)
		return map[string]any{"secret": true}, nil
	})
	hidden.Hidden = true
	broken := tool("broken", nil, func(context.Context, *tools.Context, map[string]any) (any, error) {
		return nil, errors.New("disk on fire")
	})
	return []tools.Tool{greet, hidden, broken}
}

// TestCommandRunsTool: ",<tool> args" runs the tool directly, without a
// model call, between ToolCallStarted and ToolCallFinished, and ends with
// CommandFinished, which the recorder writes as a "command" event. Hidden
// tools run as commands too.
func TestCommandRunsTool(t *testing.T) {
	cases := []struct {
		prompt, wantName, wantOut string
		wantArgs                  map[string]any
	}{
		{",greet name=Bob", "greet", "hello Bob from run-test", map[string]any{"name": "Bob"}},
		{"  , greet 'Ann Lee'  ", "greet", "hello Ann Lee from run-test", map[string]any{"name": "Ann Lee"}},
		{",secret.cmd", "secret.cmd", `{"secret":true}`, map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.prompt, func(t *testing.T) {
			var calls countCalls
			e := newEnv(t, nil, withTools(commandTools(&calls)...))
			out := e.mustRun(tc.prompt)

			if out.Text != tc.wantOut || !out.OK || e.text() != tc.wantOut {
				t.Errorf("output %+v, streamed %q", out, e.text())
			}
			if n := len(e.requests()); n != 0 {
				t.Errorf("%d model requests", n)
			}
			if got := e.log.labels(); !slices.Equal(got, []string{"ToolCallStarted", "ToolCallFinished", "CommandFinished(ok)"}) {
				t.Errorf("events %v", got)
			}
			started := eventsOf[*events.ToolCallStarted](e.log)[0]
			if started.Call.Tool != strings.ReplaceAll(tc.wantName, ".", "_") || !reflect.DeepEqual(started.Call.Arguments, tc.wantArgs) || started.Call.RunID != testRunID {
				t.Errorf("ToolCallStarted call %+v", started.Call)
			}
			fin := eventsOf[*events.CommandFinished](e.log)[0]
			if fin.Name != tc.wantName || fin.Output != tc.wantOut || fin.Err != nil || fin.Command != strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tc.prompt), ",")) {
				t.Errorf("CommandFinished %+v", fin)
			}
			var recorded bool
			for _, en := range e.tape.entries(t) {
				if en.Kind == tape.KindEvent && en.Payload["name"] == "command" {
					recorded = en.Payload["data"].(map[string]any)["status"] == "ok"
				}
			}
			if !recorded {
				t.Errorf("no ok command event on the tape: %v", kinds(e.tape.entries(t)))
			}
		})
	}
}

// TestCommandErrors: a deny from a before_tool_call hook, a failing tool
// and an unresolvable line each propagate as the run's error, and
// CommandFinished has status error with the error text as output.
func TestCommandErrors(t *testing.T) {
	deny := beforeTool{"policy", func(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
		if in.Call.Tool == "greet" {
			return tools.Deny("greeting is not allowed"), nil
		}
		return nil, nil
	}}
	cases := []struct {
		prompt     string
		wantErr    string
		wantEvents []string
	}{
		{",greet name=Bob", "[tool] greeting is not allowed", []string{"ToolCallStarted", "ToolCallFinished", "CommandFinished(error)"}},
		{",broken", "[tool] Tool 'broken' execution failed.", []string{"ToolCallStarted", "ToolCallFinished", "CommandFinished(error)"}},
		{",greet name=Bob extra", "positional argument 'extra' cannot appear after keyword arguments", []string{"CommandFinished(error)"}},
		{",ls -la", `command "ls" names no tool and the bash tool is not registered`, []string{"CommandFinished(error)"}},
		{",", "empty command", []string{"CommandFinished(error)"}},
	}
	for _, tc := range cases {
		t.Run(tc.prompt, func(t *testing.T) {
			var calls countCalls
			e := newEnv(t, nil, withTools(commandTools(&calls)...), withPlugins(deny))
			out, err := e.run(tc.prompt)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v, want %s", err, tc.wantErr)
			}
			if out.OK || len(calls.get()) != 0 {
				t.Errorf("output %+v, tool calls %v", out, calls.get())
			}
			if got := e.log.labels(); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events %v, want %v", got, tc.wantEvents)
			}
			fin := eventsOf[*events.CommandFinished](e.log)[0]
			if fin.Status != events.CommandError || fin.Output != tc.wantErr || fin.Err == nil {
				t.Errorf("CommandFinished %+v", fin)
			}
			if strings.HasPrefix(tc.wantErr, "[tool]") {
				var be *bub.Error
				if !errors.As(err, &be) || be.Kind != bub.KindTool {
					t.Errorf("err %T is not a tool *bub.Error", err)
				}
			}
		})
	}
}

// TestCommandRunsBash: a line whose first word names no registered tool
// runs the real builtin bash tool with the whole line.
func TestCommandRunsBash(t *testing.T) {
	shells, err := toolkit.NewShells()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shells.Close() })
	e := newEnv(t, nil)
	if err := toolkit.Register(e.tools, toolkit.Options{Shells: shells}); err != nil {
		t.Fatal(err)
	}
	out := e.mustRun(",echo hi   there", func(r *agent.Run) {
		r.ToolContext = func(tc *tools.Context) { tc.Workspace = t.TempDir() }
	})
	if out.Text != "hi there" {
		t.Errorf("output %q", out.Text)
	}
	started := eventsOf[*events.ToolCallStarted](e.log)[0]
	if started.Call.Tool != "bash" || !reflect.DeepEqual(started.Call.Arguments, map[string]any{"cmd": "echo hi   there"}) {
		t.Errorf("call %+v", started.Call)
	}
	if fin := eventsOf[*events.CommandFinished](e.log)[0]; fin.Name != "echo" || fin.Command != "echo hi   there" || fin.Status != events.CommandOK {
		t.Errorf("CommandFinished %+v", fin)
	}
}

// TestCommandRunsSkill: ",skill name=<n>" names the registered skill tool,
// so the agent runs it (not bash) and answers the skill's body.
func TestCommandRunsSkill(t *testing.T) {
	shells, err := toolkit.NewShells()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shells.Close() })
	ws := t.TempDir()
	dir := filepath.Join(ws, skills.ProjectDir, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, skills.FileName), []byte("---\nname: demo\ndescription: A demo\n---\nDo it.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil)
	if err := toolkit.Register(e.tools, toolkit.Options{Shells: shells, Skills: skills.New(skills.Options{Home: t.TempDir()})}); err != nil {
		t.Fatal(err)
	}
	e.state.Set(bub.StateWorkspace, ws)
	out := e.mustRun(",skill name=demo")
	if want := "Location: " + filepath.Join(dir, skills.FileName) + "\n---\nDo it."; out.Text != want {
		t.Errorf("output %q, want %q", out.Text, want)
	}
	if started := eventsOf[*events.ToolCallStarted](e.log)[0]; started.Call.Tool != "skill" || !reflect.DeepEqual(started.Call.Arguments, map[string]any{"name": "demo"}) {
		t.Errorf("call %+v", started.Call)
	}
}

// TestCommandCallHasNoCallID: a comma command reaches before_tool_call
// like a model's tool call, with the tool's model-facing name and its
// arguments but no call id — what tells a policy (and the builtin
// unknown-tool recovery) that a person typed it; the model's call carries
// its id.
func TestCommandCallHasNoCallID(t *testing.T) {
	var mu sync.Mutex
	var seen []tools.Call
	watch := beforeTool{"watch", func(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, in.Call)
		return nil, nil
	}}
	var calls countCalls
	e := newEnv(t, []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{{ID: "call_7", Name: "greet", Arguments: json.RawMessage(`{"name": "Eve"}`)}}},
		{Text: "done"},
	}, withTools(commandTools(&calls)...), withPlugins(watch))
	e.mustRun(",greet name=Bob")
	e.mustRun("greet Eve")
	mu.Lock()
	defer mu.Unlock()
	want := []tools.Call{
		{RunID: "run-test", Tool: "greet", Arguments: map[string]any{"name": "Bob"}},
		{RunID: "run-test", Tool: "greet", Arguments: map[string]any{"name": "Eve"}, CallID: "call_7"},
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("before_tool_call saw %+v\nwant %+v", seen, want)
	}
}
