package bubcmd

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/hooks"
)

// cmdPlugin registers CLI commands through register_cli_commands.
type cmdPlugin struct {
	name string
	cmds []hooks.CLICommand
}

func (p cmdPlugin) Name() string { return p.name }

func (p cmdPlugin) RegisterCLICommands(_ context.Context, in hooks.RegisterCLICommandsInput) error {
	for _, c := range p.cmds {
		if err := in.App.AddCommand(c); err != nil {
			return err
		}
	}
	return nil
}

func runBub(t *testing.T, plugins []hooks.Plugin, args ...string) (string, error) {
	t.Helper()
	root, err := NewBub(t.Context(), &Env{Env: service.Env{Getenv: func(string) string { return "" }, Plugins: plugins}})
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), err
}

// TestPluginCommands: a plugin's command runs with its flags and streams;
// a plugin's command named like a builtin one shadows it (the plugin has
// the higher priority); a command without Run is an error of NewBub.
func TestPluginCommands(t *testing.T) {
	fs := flag.NewFlagSet("greet", flag.ContinueOnError)
	loud := fs.Bool("loud", false, "shout")
	greet := hooks.CLICommand{Use: "greet NAME", Short: "Say hello", Flags: fs,
		Run: func(_ context.Context, stdio hooks.CLIStdio, args []string) error {
			msg := "hello " + strings.Join(args, " ")
			if *loud {
				msg = strings.ToUpper(msg)
			}
			_, err := fmt.Fprintln(stdio.Out, msg)
			return err
		}}
	models := hooks.CLICommand{Use: "models", Short: "the plugin's own models command",
		Run: func(_ context.Context, stdio hooks.CLIStdio, _ []string) error {
			_, err := fmt.Fprintln(stdio.Out, "plugin models")
			return err
		}}
	plugins := []hooks.Plugin{cmdPlugin{name: "greeter", cmds: []hooks.CLICommand{greet, models}}}
	if out, err := runBub(t, plugins, "greet", "--loud", "bub"); err != nil || out != "HELLO BUB\n" {
		t.Errorf("greet --loud bub = %q, %v", out, err)
	}
	if out, err := runBub(t, plugins, "models"); err != nil || out != "plugin models\n" {
		t.Errorf("models with a shadowing plugin = %q, %v; want the plugin's", out, err)
	}
	if out, err := runBub(t, nil, "models"); err != nil || !strings.Contains(out, "echo:echo") {
		t.Errorf("builtin models = %q, %v", out, err)
	}
	bad := []hooks.Plugin{cmdPlugin{name: "bad", cmds: []hooks.CLICommand{{Use: "nothing"}}}}
	if _, err := runBub(t, bad); err == nil || !strings.Contains(err.Error(), "no Run") {
		t.Errorf("a command without Run: %v", err)
	}
}
