package hookstest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// Registry returns a started registry of plugins, registered in the order
// given (the last has the highest priority), for calling a plugin's hooks
// exactly as the runtime dispatches them: reg.BeforeToolCall,
// reg.SystemPrompt, reg.Startup().Channels, …. It is closed when the test
// ends. The runtime registers the builtin plugin first; pass it too when
// a test needs its defaults.
func Registry(t testing.TB, plugins ...hooks.Plugin) *hooks.Registry[tape.Store, tape.Context] {
	t.Helper()
	reg := hooks.New[tape.Store, tape.Context]()
	for _, p := range plugins {
		if err := reg.Register(p); err != nil {
			t.Fatalf("registering %s: %v", p.Name(), err)
		}
	}
	if err := reg.Start(context.Background()); err != nil {
		t.Fatalf("starting plugins: %v", err)
	}
	t.Cleanup(func() {
		if err := reg.Close(context.Background()); err != nil {
			t.Errorf("closing plugins: %v", err)
		}
	})
	return reg
}

// CLIApp is an in-memory CLI application for testing register_cli_commands:
// it keeps the commands registered on it and runs them by name.
type CLIApp struct {
	Commands []hooks.CLICommand
}

// AddCommand implements hooks.CLIApp.
func (a *CLIApp) AddCommand(c hooks.CLICommand) error {
	a.Commands = append(a.Commands, c)
	return nil
}

// Run runs the command registered under name (the first word of its Use)
// with args and returns what it wrote to standard output. Flags in args
// are parsed by the command's flag set, if it has one.
func (a *CLIApp) Run(ctx context.Context, name string, args ...string) (string, error) {
	for _, c := range a.Commands {
		if use, _, _ := strings.Cut(c.Use, " "); use != name {
			continue
		}
		if c.Flags != nil {
			if err := c.Flags.Parse(args); err != nil {
				return "", err
			}
			args = c.Flags.Args()
		}
		var out, errOut bytes.Buffer
		err := c.Run(ctx, hooks.CLIStdio{In: strings.NewReader(""), Out: &out, Err: &errOut}, args)
		return out.String(), err
	}
	return "", fmt.Errorf("no command %q registered", name)
}
