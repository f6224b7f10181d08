package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
)

// icTimeout is the interceptors' call timeout in TestInterceptors.
const icTimeout = time.Second

// TestInterceptors runs a worker and ingress with three remote interceptor
// services, each a separate process of the example policy binary
// (BUB_INTERCEPTORS=audit,router,guard, so guard runs first, then router,
// then audit):
//
//   - router (fail-open) rewrites the model openai:fake to openai:fake-b,
//     audit (fail-open) rewrites openai:fake-b to openai:fake-c: the model
//     is asked for fake-c only because audit saw router's change;
//   - guard (fail-closed, two instances in one queue group) denies bash:
//     the tool never runs and the model's next request carries the denial
//     as the tool result.
//
// Then audit is killed: LLM calls proceed without it (fail-open). Then
// both guards are killed: tool calls are denied within the timeout
// (fail-closed) while the turn goes on.
func TestInterceptors(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	// Each turn's second request answers the tool result (its last user
	// message is the continuation prompt, so those steps match anything).
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Match: "run bash", ToolCalls: []fakellm.ToolCall{{ID: "call_bash", Name: "bash", Arguments: json.RawMessage(`{"cmd": "touch ran.txt"}`)}}},
		{Text: "bash was refused"},
		{Match: "read the note", ToolCalls: []fakellm.ToolCall{{ID: "call_read", Name: "fs_read", Arguments: json.RawMessage(`{"path": "note.txt"}`)}}},
		{Text: "the note is read"},
		{Match: "read it again", ToolCalls: []fakellm.ToolCall{{ID: "call_again", Name: "fs_read", Arguments: json.RawMessage(`{"path": "note.txt"}`)}}},
		{Text: "reading was refused"},
	}})
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "note.txt"), []byte("bananas are yellow\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	natsEnv := []string{"BUB_NATS_URL=" + srv.URL}
	audit := start(t, "policy", natsEnv, "--name", "audit", "--model-from", "openai:fake-b", "--model", "openai:fake-c")
	start(t, "policy", natsEnv, "--name", "router", "--model-from", "openai:fake", "--model", "openai:fake-b")
	guards := []*proc{
		start(t, "policy", natsEnv, "--name", "guard", "--deny-tools", "bash"),
		start(t, "policy", natsEnv, "--name", "guard", "--deny-tools", "bash"),
	}
	icWaitInstances(t, nc, map[string]int{"audit": 1, "router": 1, "guard": 2})

	env := append(natsEnv, "BUB_MODEL=openai:fake", "BUB_API_BASE="+base, "BUB_API_KEY=x",
		"BUB_INTERCEPTORS=audit,router,guard",
		"BUB_INTERCEPTOR_AUDIT_TIMEOUT="+icTimeout.String(),
		"BUB_INTERCEPTOR_ROUTER_TIMEOUT="+icTimeout.String(),
		"BUB_INTERCEPTOR_GUARD_TIMEOUT="+icTimeout.String(),
		"BUB_INTERCEPTOR_GUARD_FAILURE=closed")

	// `bub hooks` lists the remote plugins in run order with what discovery found.
	hooksOut := run(t, "bub", env, "hooks", "--nats", srv.URL)
	for _, want := range []string{
		"before_llm_call [chained, in run order; a decision stops the chain; failures isolated]: " +
			"router (remote: router: 1 instance, timeout 1s, fail-open), audit (remote: audit: 1 instance, timeout 1s, fail-open)",
		"before_tool_call [chained, in run order; a decision stops the chain; failures isolated]: " +
			"guard (remote: guard: 2 instances, timeout 1s, fail-closed)",
	} {
		if !strings.Contains(hooksOut, want) {
			t.Errorf("bub hooks lacks\n%s\nin:\n%s", want, hooksOut)
		}
	}

	decisions := icWatchDecisions(t, nc)
	httpAddr := freeAddr(t)
	start(t, "worker", env, "--workspace", ws)
	start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)

	// 1. Everything up: the chain rewrites the model twice, guard denies bash.
	if got := icTurn(t, web, "ic:chain", "please run bash"); got != "bash was refused" {
		t.Fatalf("reply %q", got)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].Model != "fake-c" || reqs[1].Model != "fake-c" {
		t.Fatalf("models asked: %v, want fake-c twice", icModels(reqs))
	}
	if res := icToolResult(reqs[1], "call_bash"); !strings.Contains(res, "Tool 'bash' is not allowed by policy.") {
		t.Errorf("the denial did not reach the model as the tool result: %q", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
		t.Error("the denied bash command ran")
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		got := strings.Join(decisions.of("ic:chain"), "; ")
		want := "router before_llm_call modify; audit before_llm_call modify; guard before_tool_call deny"
		return strings.HasPrefix(got, want), "decisions: " + got
	})

	// 2. audit is gone: fail-open, LLM calls proceed with router's model only.
	audit.kill()
	icWaitInstances(t, nc, map[string]int{"audit": 0})
	began := time.Now()
	if got := icTurn(t, web, "ic:open", "read the note"); got != "the note is read" {
		t.Fatalf("reply %q", got)
	}
	reqs = fake.Requests()[2:]
	if len(reqs) != 2 || reqs[0].Model != "fake-b" || reqs[1].Model != "fake-b" {
		t.Fatalf("models asked without audit: %v, want fake-b twice", icModels(reqs))
	}
	if res := icToolResult(reqs[1], "call_read"); !strings.Contains(res, "bananas are yellow") {
		t.Errorf("fs_read did not run with guard up: %q", res)
	}
	if took := time.Since(began); took > 2*icTimeout+10*time.Second {
		t.Errorf("turn without audit took %v", took)
	}

	// 3. Both guards are gone: fail-closed, the tool call is denied within
	// the timeout and the turn goes on.
	for _, g := range guards {
		g.kill()
	}
	icWaitInstances(t, nc, map[string]int{"guard": 0})
	if got := icTurn(t, web, "ic:closed", "read it again"); got != "reading was refused" {
		t.Fatalf("reply %q", got)
	}
	reqs = fake.Requests()[4:]
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2", len(reqs))
	}
	var denial struct{ Kind, Message string }
	res := icToolResult(reqs[1], "call_again")
	if err := json.Unmarshal([]byte(res), &denial); err != nil || denial.Kind != "tool" ||
		!strings.Contains(denial.Message, `interceptor "guard"`) || !strings.Contains(denial.Message, "fails closed") {
		t.Errorf("tool result with guard down: %q, want a fail-closed denial", res)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		d, ok := decisions.find("ic:closed", "guard", "deny")
		return ok && d.Remote && time.Duration(d.DurationMS)*time.Millisecond <= icTimeout, "decisions: " + strings.Join(decisions.of("ic:closed"), "; ")
	})
}

// icModels returns the models of the requests.
func icModels(reqs []fakellm.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Model
	}
	return out
}
