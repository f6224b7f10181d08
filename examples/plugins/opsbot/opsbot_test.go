package opsbot_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/examples/plugins/opsbot"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/hookstest"
	"github.com/bubbus/bub/pkg/tools"
)

func TestPolicy(t *testing.T) {
	reg := hookstest.Registry(t, opsbot.New(opsbot.FromEnv(func(string) string { return "" })))
	ctx := context.Background()
	tests := []struct {
		tool, cmd string
		denied    bool
	}{
		{"bash", "ls -la", false},
		{"bash", "rm -rf /", true},
		{"bash", "sudo shutdown -h now", true},
		{"fs.read", "rm -rf", false}, // only bash commands are checked
	}
	for _, tc := range tests {
		call := tools.Call{RunID: "r1", Tool: tc.tool, Arguments: map[string]any{"cmd": tc.cmd}}
		_, d, err := reg.BeforeToolCall(ctx, hooks.BeforeToolCallInput{Call: call, State: bub.NewState(nil)})
		if err != nil {
			t.Fatal(err)
		}
		if got := d != nil && d.Action == tools.ActionDeny; got != tc.denied {
			t.Errorf("%s %q: denied = %v (decision %+v), want %v", tc.tool, tc.cmd, got, d, tc.denied)
		}
		if tc.denied && !strings.Contains(d.Message, "opsbot policy") {
			t.Errorf("deny message %q does not name the policy", d.Message)
		}
	}
}

func TestDenyFromEnv(t *testing.T) {
	cfg := opsbot.FromEnv(func(k string) string {
		if k == "OPSBOT_DENY" {
			return " curl , wget"
		}
		return ""
	})
	p := opsbot.New(cfg)
	if p.Check("curl example.com") == "" || p.Check("wget x") == "" || p.Check("rm -rf /") != "" {
		t.Errorf("OPSBOT_DENY=curl,wget: checks = %q %q %q", p.Check("curl example.com"), p.Check("wget x"), p.Check("rm -rf /"))
	}
}

func TestSystemPrompt(t *testing.T) {
	reg := hookstest.Registry(t, opsbot.New(opsbot.Config{}))
	got, err := reg.SystemPrompt(context.Background(), hooks.SystemPromptInput{Prompt: "hi", State: bub.NewState(nil)})
	if err != nil || got != opsbot.HouseRules {
		t.Errorf("system prompt = %q, %v; want the house rules", got, err)
	}
}

func TestAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	reg := hookstest.Registry(t, opsbot.New(opsbot.Config{AuditFile: path}))
	ctx := context.Background()
	for i, res := range []*tools.Result{{Result: "ok"}, {Err: bub.Errorf(bub.KindTool, "boom")}} {
		call := tools.Call{RunID: "r1", Tool: "bash", CallID: []string{"c1", "c2"}[i], Arguments: map[string]any{"cmd": "ls"}}
		if err := reg.AfterToolCall(ctx, hooks.AfterToolCallInput{Call: call, Result: res, State: bub.NewState(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("audit has %d lines, want 2:\n%s", len(lines), b)
	}
	var second opsbot.AuditRecord
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if second.CallID != "c2" || second.Tool != "bash" || !strings.Contains(second.Error, "boom") {
		t.Errorf("second audit record = %+v", second)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("audit file mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestCLICommand(t *testing.T) {
	reg := hookstest.Registry(t, opsbot.New(opsbot.FromEnv(func(string) string { return "" })))
	app := &hookstest.CLIApp{}
	ctx := context.Background()
	if err := reg.Startup().RegisterCLICommands(ctx, hooks.RegisterCLICommandsInput{App: app}); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{"ls": "allowed\n", "rm -rf /tmp/x": "denied: opsbot policy: commands containing \"rm -rf\" are not allowed\n"} {
		out, err := app.Run(ctx, "opsbot-check", cmd)
		if err != nil || out != want {
			t.Errorf("opsbot-check %q = %q, %v; want %q", cmd, out, err, want)
		}
	}
	if _, err := app.Run(ctx, "opsbot-check"); err == nil {
		t.Error("opsbot-check without a command succeeded")
	}
}

// TestWebhookChannel runs the channel: a POST reaches the handler as an
// envelope of the webhook channel, Send POSTs the reply to the callback,
// and bad input is a 400 that reaches nobody.
func TestWebhookChannel(t *testing.T) {
	replies := make(chan opsbot.WebhookMessage, 1)
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m opsbot.WebhookMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("callback body: %v", err)
		}
		replies <- m
	}))
	defer callback.Close()
	addr := freeAddr(t)
	got := make(chan *envelope.Envelope, 1)
	handler := func(_ context.Context, env *envelope.Envelope) error {
		if env.ChatID == "reject" {
			return errors.New("no")
		}
		got <- env
		return nil
	}
	reg := hookstest.Registry(t, opsbot.New(opsbot.Config{WebhookAddr: addr, WebhookCallback: callback.URL}))
	ctx := context.Background()
	chs, err := reg.Startup().Channels(ctx, hooks.ProvideChannelsInput{Handler: handler})
	if err != nil || len(chs) != 1 || chs[0].Name() != opsbot.WebhookName {
		t.Fatalf("channels = %v, %v; want the webhook channel", chs, err)
	}
	ch := chs[0].(channels.Channel)
	if err := ch.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ch.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	post := func(body string) int {
		resp, err := http.Post("http://"+addr+"/message", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for body, want := range map[string]int{`{"chat_id":"c1"}`: 400, `not json`: 400, `{"chat_id":"c","text":"x","extra":1}`: 400, `{"chat_id":"reject","text":"x"}`: 502} {
		if code := post(body); code != want {
			t.Errorf("POST %s = %d, want %d", body, code, want)
		}
	}
	if code := post(`{"id":"m1","chat_id":"c1","text":"disk usage?"}`); code != http.StatusAccepted {
		t.Fatalf("POST = %d, want 202", code)
	}
	env := <-got
	if env.ID != "m1" || env.Channel != "webhook" || env.OutputChannel != "webhook" || env.ChatID != "c1" || env.Content != "disk usage?" {
		t.Errorf("envelope = %+v", env)
	}
	out := &envelope.Envelope{ID: "m1/0", ChatID: "c1", Content: "42% used", InReplyTo: "m1"}
	if err := ch.(channels.Sender).Send(ctx, out); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-replies:
		if r.Text != "42% used" || r.ChatID != "c1" || r.InReplyTo != "m1" {
			t.Errorf("reply = %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply reached the callback")
	}
}

func TestWebhookCallbackErrors(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer failing.Close()
	for name, cb := range map[string]string{"no callback": "", "5xx": failing.URL} {
		chs, _ := opsbot.New(opsbot.Config{WebhookAddr: "127.0.0.1:0", WebhookCallback: cb}).ProvideChannels(context.Background(), hooks.ProvideChannelsInput{})
		err := chs[0].(channels.Sender).Send(context.Background(), &envelope.Envelope{ID: "x", Content: "y"})
		if err == nil {
			t.Errorf("%s: Send succeeded", name)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
