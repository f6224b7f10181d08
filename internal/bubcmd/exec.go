package bubcmd

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/hooks"
)

// Stdio are a command's standard streams; nil ones are the process's.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Exec builds a command with newCmd over the process environment and the
// configuration file of the home args name (service.LoadEnv: flags beat
// BUB_* variables, which beat <home>/config.yaml, which beats the
// defaults) and the plugins, and runs it with args.
func Exec(ctx context.Context, args []string, stdio Stdio, plugins []hooks.Plugin, newCmd func(context.Context, *Env) (*cobra.Command, error)) error {
	senv, err := service.LoadEnv(args, os.Getenv)
	if err != nil {
		return err
	}
	senv.Plugins = plugins
	cmd, err := newCmd(ctx, &Env{Env: senv})
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
