package bubcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/channelset"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// Env is what every command is built from: what a service is built from
// (the environment, flags taking their defaults from it, and the plugins
// of this build) and the CLI's startup registry.
type Env struct {
	service.Env

	// startup is the process's startup registry (see startupHooks).
	startup *hooks.Registry[tape.Store, tape.Context]
}

// startupHooks returns the process's startup registry: the one NewBub
// built for register_cli_commands, or one built on first use.
func (env *Env) startupHooks() (*hooks.Registry[tape.Store, tape.Context], error) {
	if env.startup == nil {
		reg, err := env.startupRegistry(nil)
		if err != nil {
			return nil, err
		}
		env.startup = reg
	}
	return env.startup, nil
}

// startupRegistry returns a registry of the builtin plugin and the
// plugins for the startup hooks a command calls (register_cli_commands,
// onboard_config, provide_runtime_options, provide_channels). Nothing is
// started: startup hooks run on constructed plugins, as in Bub.
func (env *Env) startupRegistry(commands func(context.Context, hooks.CLIApp) error) (*hooks.Registry[tape.Store, tape.Context], error) {
	st := builtin.Startup{Commands: commands, Channels: channelset.Builtin(env.Getenv, env.Logger())}
	if cfg, err := llm.ConfigFromEnv(env.Getenv); err == nil {
		cfg = cfg.WithDefaults()
		st.Models = append([]string{cfg.Model}, cfg.FallbackModels...)
	}
	return builtin.StartupRegistry(st, env.Plugins, env.Logger())
}

// cliApp is the CLI application register_cli_commands adds commands to:
// the root command. A name already taken keeps its first command, which
// belongs to the higher-priority plugin (implementations run in priority
// order); the later one is skipped with a warning.
type cliApp struct {
	root *cobra.Command
	log  *slog.Logger
}

// AddCommand implements hooks.CLIApp.
func (a *cliApp) AddCommand(c hooks.CLICommand) error {
	if c.Run == nil {
		return fmt.Errorf("command %q has no Run", c.Use)
	}
	run := c.Run
	cmd := &cobra.Command{
		Use: c.Use, Short: c.Short, Long: c.Long, Hidden: c.Hidden,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), hooks.CLIStdio{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}, args)
		},
	}
	if c.Flags != nil {
		cmd.Flags().AddGoFlagSet(c.Flags)
	}
	if cmd.Name() == "" {
		return errors.New("a command needs a name (CLICommand.Use)")
	}
	a.add(cmd)
	return nil
}

func (a *cliApp) add(cmds ...*cobra.Command) {
	for _, cmd := range cmds {
		if taken, _, err := a.root.Find([]string{cmd.Name()}); err == nil && taken != a.root {
			a.log.Warn("cli.command_shadowed", "command", cmd.Name())
			continue
		}
		a.root.AddCommand(cmd)
	}
}
