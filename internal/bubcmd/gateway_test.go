package bubcmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/gatewaycmd"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/channels/telegram/telegramtest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// chatPlugin provides the "chat" channel, a channel with a transport of
// its own, as a user's plugin would.
type chatPlugin struct {
	mu      sync.Mutex
	running *chatChannel // the channel a gateway started
	sent    []*envelope.Envelope
}

func (*chatPlugin) Name() string { return "chat-plugin" }

func (p *chatPlugin) ProvideChannels(_ context.Context, in hooks.ProvideChannelsInput) ([]hooks.Channel, error) {
	return []hooks.Channel{&chatChannel{p: p, handler: in.Handler}}, nil
}

func (p *chatPlugin) started() *chatChannel {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

func (p *chatPlugin) replies() []*envelope.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*envelope.Envelope(nil), p.sent...)
}

type chatChannel struct {
	p       *chatPlugin
	handler hooks.MessageHandler
}

func (*chatChannel) Name() string { return "chat" }

func (c *chatChannel) Start(context.Context) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.running = c
	return nil
}

func (c *chatChannel) Stop(context.Context) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.running = nil
	return nil
}

func (c *chatChannel) Send(_ context.Context, msg *envelope.Envelope) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.sent = append(c.p.sent, msg)
	return nil
}

func testEnv(vars map[string]string, plugins ...hooks.Plugin) *Env {
	return &Env{Env: service.Env{Getenv: func(k string) string { return vars[k] }, Plugins: plugins}}
}

// TestUpRunsAPluginChannel: `bub up` with a plugin's channel enabled runs
// the gateway; a message the channel receives is answered by a worker and
// the reply delivered by the channel's Send.
func TestUpRunsAPluginChannel(t *testing.T) {
	p := &chatPlugin{}
	env := testEnv(map[string]string{"BUB_HOME": t.TempDir(), "BUB_MODEL": "echo:echo"}, p)
	cmd := newUp(env)
	var out proctest.Buffer // the services log while up prints
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--nats-listen", "", "--http", "127.0.0.1:0", "--enable-channel", "chat", "--log-level", "warn"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bub up: %v\n%s", err, out.String())
		}
	}()
	natstest.Eventually(t, 20*time.Second, func() (bool, string) {
		return p.started() != nil, "the chat channel did not start"
	})
	msg := &envelope.Envelope{Content: "hello gateway", Channel: "chat", ChatID: "room"}
	// The worker may still be binding its consumer; the inbound stream
	// keeps the message meanwhile.
	if err := p.started().handler(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() (bool, string) {
		for _, r := range p.replies() {
			if r.InReplyTo == msg.ID {
				return true, ""
			}
		}
		return false, "no reply sent on the chat channel"
	})
	if n := len(p.replies()); n != 1 {
		t.Fatalf("%d replies sent, want 1", n)
	}
}

// TestUpWithoutTransportChannelsRunsNoGateway: with only the builtin
// channels (http, cli) enabled, `bub up` runs no gateway.
func TestUpWithoutTransportChannelsRunsNoGateway(t *testing.T) {
	for _, enabled := range []string{"all", "", "nope"} {
		o, err := upGateway(t.Context(), testEnv(map[string]string{}), &gatewaycmd.Flags{Enabled: []string{enabled}})
		if err != nil || o != nil {
			t.Fatalf("enabled %q: gateway %+v, %v; want none", enabled, o, err)
		}
	}
	o, err := upGateway(t.Context(), testEnv(map[string]string{}, &chatPlugin{}), &gatewaycmd.Flags{Enabled: []string{"all"}})
	if err != nil || o == nil || o.Enabled != "all" {
		t.Fatalf("with a chat channel: %+v, %v", o, err)
	}
}

// TestGatewayWithNoChannelsFails is behaviour check 88: nothing enabled
// fails before connecting, with Bub's message.
func TestGatewayWithNoChannelsFails(t *testing.T) {
	cmd := newServiceCommand(testEnv(map[string]string{"BUB_HOME": t.TempDir()}), gatewaycmd.Service)
	cmd.SetArgs([]string{"--enable-channel", ""})
	var out proctest.Buffer // the services log while up prints
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(t.Context())
	if !errors.Is(err, gateway.ErrNoChannels) || !strings.HasPrefix(err.Error(), "No channels are enabled.") {
		t.Fatalf("err = %v", err)
	}
}

// TestUpRunsTelegram: with BUB_TELEGRAM_TOKEN set, `bub up` runs the
// gateway with the builtin telegram channel (against a fake Bot API): a
// comma command typed in Telegram is answered in the chat exactly once.
func TestUpRunsTelegram(t *testing.T) {
	srv := telegramtest.NewServer(t)
	env := testEnv(map[string]string{
		"BUB_HOME": t.TempDir(), "BUB_MODEL": "echo:echo",
		"BUB_TELEGRAM_TOKEN": srv.Token(), "BUB_TELEGRAM_API_BASE": srv.URL(),
	})
	cmd := newUp(env)
	var out proctest.Buffer // the services log while up prints
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--nats-listen", "", "--http", "127.0.0.1:0", "--log-level", "warn"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bub up: %v\n%s", err, out.String())
		}
	}()
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	// The channel drops updates sent before it started (as Bub does).
	polling := func() bool {
		for _, c := range srv.Calls() {
			if c.Method == "getUpdates" {
				return true
			}
		}
		return false
	}
	if err := srv.Wait(wctx, polling); err != nil {
		t.Fatalf("the telegram channel never polled: %v\n%s", err, out.String())
	}
	if _, err := srv.SendUserMessage(10, ",help"); err != nil {
		t.Fatal(err)
	}
	sent, err := srv.WaitSent(wctx, 1)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sent[0].ChatID != "10" || !strings.Contains(sent[0].Text, ",help") {
		t.Fatalf("sent %+v", sent[0])
	}
	if !strings.Contains(out.String(), "gateway true") {
		t.Fatalf("bub up did not report its gateway:\n%s", out.String())
	}
}

// TestGatewayWithEmptyConfigFails is behaviour check 88 through the
// configuration file: `enabled_channels: ""` enables nothing.
func TestGatewayWithEmptyConfigFails(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("enabled_channels: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUB_HOME", home)
	t.Setenv("BUB_ENABLED_CHANNELS", "")
	var out bytes.Buffer
	err := Exec(t.Context(), []string{"--home", home}, Stdio{Out: &out, Err: &out}, nil, func(_ context.Context, env *Env) (*cobra.Command, error) {
		return newServiceCommand(env, gatewaycmd.Service), nil
	})
	if !errors.Is(err, gateway.ErrNoChannels) {
		t.Fatalf("err = %v", err)
	}
	// Without the key, all is the default (and here no NATS URL is the
	// next problem).
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("model: echo:echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = Exec(t.Context(), []string{"--home", home}, Stdio{Out: &out, Err: &out}, nil, func(_ context.Context, env *Env) (*cobra.Command, error) {
		return newServiceCommand(env, gatewaycmd.Service), nil
	})
	if err == nil || errors.Is(err, gateway.ErrNoChannels) || !strings.Contains(err.Error(), "NATS URL") {
		t.Fatalf("without enabled_channels: %v", err)
	}
}
