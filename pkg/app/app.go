package app

import (
	"context"
	"io"

	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/hooks"
)

// Main runs the bub command with the process's arguments, streams and
// environment, the plugins registered after the builtin plugin in order
// (the last has the highest priority). It exits non-zero on error and
// cancels the command on SIGINT or SIGTERM.
func Main(plugins ...hooks.Plugin) {
	cli.Main(func(ctx context.Context, args []string) error {
		return Run(ctx, args, Stdio{}, plugins...)
	})
}

// Stdio are the standard streams of [Run]; nil ones are the process's.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Run runs the bub command with args (without the program name) on the
// given streams and the process environment, returning its error instead
// of exiting. The command ends when ctx does.
func Run(ctx context.Context, args []string, stdio Stdio, plugins ...hooks.Plugin) error {
	return bubcmd.Exec(ctx, args, bubcmd.Stdio(stdio), plugins, bubcmd.NewBub)
}
