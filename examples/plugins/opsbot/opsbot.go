package opsbot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// Name is the plugin's name in `bub hooks` and the logs.
const Name = "opsbot"

// HouseRules is the plugin's system prompt fragment.
const HouseRules = "<opsbot_rules>You work for the operations team. Never run destructive shell commands; " +
	"say what you would run instead. Keep answers short.</opsbot_rules>"

// Config configures the plugin; see the package doc for the environment.
type Config struct {
	// Deny lists substrings that make a bash command denied.
	Deny []string
	// AuditFile, when set, receives one JSON line per finished tool call.
	AuditFile string
	// WebhookAddr is the webhook channel's listen address; empty disables
	// the channel.
	WebhookAddr string
	// WebhookCallback receives the channel's replies as POSTs.
	WebhookCallback string
}

// DefaultDeny is the deny list when OPSBOT_DENY is unset.
var DefaultDeny = []string{"rm -rf", "mkfs", "shutdown"}

// FromEnv reads the configuration from the environment.
func FromEnv(getenv func(string) string) Config {
	c := Config{
		Deny:            DefaultDeny,
		AuditFile:       getenv("OPSBOT_AUDIT_FILE"),
		WebhookAddr:     getenv("OPSBOT_WEBHOOK_ADDR"),
		WebhookCallback: getenv("OPSBOT_WEBHOOK_CALLBACK"),
	}
	if v := getenv("OPSBOT_DENY"); v != "" {
		c.Deny = nil
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				c.Deny = append(c.Deny, d)
			}
		}
	}
	return c
}

// Plugin is the opsbot plugin.
type Plugin struct {
	cfg Config
	// mu serialises audit appends.
	mu sync.Mutex
}

// Compile-time guards: the hooks the plugin implements.
var (
	_ hooks.SystemPrompter      = (*Plugin)(nil)
	_ hooks.ToolCallInterceptor = (*Plugin)(nil)
	_ hooks.ToolCallObserver    = (*Plugin)(nil)
	_ hooks.ChannelProvider     = (*Plugin)(nil)
	_ hooks.CLICommandRegistrar = (*Plugin)(nil)
)

// New returns the plugin. Constructing it does no I/O.
func New(cfg Config) *Plugin { return &Plugin{cfg: cfg} }

// Name implements hooks.Plugin.
func (p *Plugin) Name() string { return Name }

// SystemPrompt adds the house rules.
func (p *Plugin) SystemPrompt(context.Context, hooks.SystemPromptInput) (string, error) {
	return HouseRules, nil
}

// Check returns why the policy denies the shell command, or "" when it
// allows it.
func (p *Plugin) Check(command string) string {
	for _, d := range p.cfg.Deny {
		if strings.Contains(command, d) {
			return fmt.Sprintf("opsbot policy: commands containing %q are not allowed", d)
		}
	}
	return ""
}

// BeforeToolCall denies bash commands the policy does not allow; every
// other call gets no opinion.
func (p *Plugin) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if in.Call.Tool != "bash" {
		return nil, nil
	}
	cmd, _ := in.Call.Arguments["cmd"].(string)
	if why := p.Check(cmd); why != "" {
		return tools.Deny(why), nil
	}
	return nil, nil
}

// AuditRecord is one line of the audit file.
type AuditRecord struct {
	Time   time.Time      `json:"time"`
	RunID  string         `json:"run_id"`
	Tool   string         `json:"tool"`
	CallID string         `json:"call_id,omitempty"`
	Args   map[string]any `json:"arguments,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// AfterToolCall appends the finished call to the audit file.
func (p *Plugin) AfterToolCall(_ context.Context, in hooks.AfterToolCallInput) error {
	if p.cfg.AuditFile == "" {
		return nil
	}
	rec := AuditRecord{Time: time.Now().UTC(), RunID: in.Call.RunID, Tool: in.Call.Tool, CallID: in.Call.CallID, Args: in.Call.Arguments}
	if in.Result != nil && in.Result.Err != nil {
		rec.Error = in.Result.Err.Error()
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("opsbot: encoding audit record: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.cfg.AuditFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("opsbot: opening audit file: %w", err)
	}
	_, werr := f.Write(append(line, '\n'))
	return errors.Join(werr, f.Close())
}

// ProvideChannels returns the webhook channel when it has an address.
func (p *Plugin) ProvideChannels(_ context.Context, in hooks.ProvideChannelsInput) ([]hooks.Channel, error) {
	if p.cfg.WebhookAddr == "" {
		return nil, nil
	}
	return []hooks.Channel{newWebhook(p.cfg.WebhookAddr, p.cfg.WebhookCallback, in.Handler)}, nil
}

// RegisterCLICommands adds `bub opsbot-check COMMAND`.
func (p *Plugin) RegisterCLICommands(_ context.Context, in hooks.RegisterCLICommandsInput) error {
	return in.App.AddCommand(hooks.CLICommand{
		Use:   "opsbot-check COMMAND",
		Short: "Say whether the opsbot policy lets a shell command run",
		Run: func(_ context.Context, stdio hooks.CLIStdio, args []string) error {
			if len(args) != 1 {
				return errors.New("usage: opsbot-check COMMAND")
			}
			if why := p.Check(args[0]); why != "" {
				_, err := fmt.Fprintln(stdio.Out, "denied:", why)
				return err
			}
			_, err := fmt.Fprintln(stdio.Out, "allowed")
			return err
		},
	})
}
