package bubcmd

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/hooks"
)

// Stdio are a command's standard streams; nil ones are the process's.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Exec builds a command with newCmd over the process environment and the
// configuration file of the home args name (config.LoadFor: flags beat
// BUB_* variables, which beat <home>/config.yaml, which beats the
// defaults) and the plugins, and runs it with args.
func Exec(ctx context.Context, args []string, stdio Stdio, plugins []hooks.Plugin, newCmd func(context.Context, *Env) (*cobra.Command, error)) error {
	getenv, cfg, err := config.LoadFor(args, os.Getenv)
	if err != nil {
		return err
	}
	env := &Env{Getenv: getenv, Plugins: plugins, Lookup: config.Lookup(os.Getenv, cfg)}
	cmd, err := newCmd(ctx, env)
	if err != nil {
		return err
	}
	cmd.SetArgs(args)
	if stdio.In != nil {
		cmd.SetIn(stdio.In)
	}
	if stdio.Out != nil {
		cmd.SetOut(stdio.Out)
	}
	if stdio.Err != nil {
		cmd.SetErr(stdio.Err)
	}
	return cmd.ExecuteContext(ctx)
}

// Service runs the standalone service command newCmd builds (cmd/worker,
// cmd/ingress, cmd/recorder) with the process's arguments and streams.
func Service(newCmd func(*Env) *cobra.Command) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		return Exec(ctx, args, Stdio{}, nil, func(_ context.Context, env *Env) (*cobra.Command, error) {
			cmd := newCmd(env)
			cmd.SilenceErrors = true
			return cmd, nil
		})
	}
}
