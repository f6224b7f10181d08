package service

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/config"
)

// Main is the whole main of a service binary: it runs the service newSpec
// builds with the process's arguments, environment and streams (see
// [Exec]), cancelled on SIGINT or SIGTERM, and exits non-zero on error.
func Main(newSpec func(Env) Spec) {
	cli.Main(func(ctx context.Context, args []string) error {
		return Exec(ctx, args, os.Getenv, os.Stdout, os.Stderr, newSpec)
	})
}

// LoadEnv returns the Env of args and getenv: getenv over the
// configuration file of the home args name (config.LoadFor: flags beat
// BUB_* variables, which beat <home>/config.yaml, which beats the
// defaults), without plugins.
func LoadEnv(args []string, getenv cli.Getenv) (Env, error) {
	merged, cfg, err := config.LoadFor(args, getenv)
	if err != nil {
		return Env{}, err
	}
	return Env{Getenv: merged, Lookup: config.Lookup(getenv, cfg)}, nil
}

// Exec parses args (without the program name) as the flags of the
// service newSpec builds and runs it ([Run]); --help prints the usage to
// stdout instead. The flags and their help are those of `bub <name>`.
func Exec(ctx context.Context, args []string, getenv cli.Getenv, stdout, stderr io.Writer, newSpec func(Env) Spec) error {
	env, err := LoadEnv(args, getenv)
	if err != nil {
		return err
	}
	s := newSpec(env)
	fs := pflag.NewFlagSet(s.Name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, the usage is printed below
	var common cli.Common
	s.BindFlags(fs, &common, env.Getenv)
	help := fs.BoolP("help", "h", false, "help for "+s.Name)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *help {
		_, err := io.WriteString(stdout, Usage(s, fs))
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unknown command %q for %q", fs.Arg(0), s.Name)
	}
	return Run(ctx, &common, s, env.Getenv, stderr)
}

// Usage is the help of a service binary: the layout of `bub <name>
// --help`, with the program's name alone on the usage line.
func Usage(s Spec, fs *pflag.FlagSet) string {
	return s.Short + "\n\nUsage:\n  " + s.Name + " [flags]\n\nFlags:\n" + strings.TrimRight(fs.FlagUsages(), " \n") + "\n"
}
