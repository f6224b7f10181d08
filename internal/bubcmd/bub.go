package bubcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/gatewaycmd"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/hooks"
)

// NewBub returns the bub CLI of a build: Bub's own commands, registered by
// the builtin plugin's register_cli_commands, and every command the
// plugins register, a plugin's command shadowing a builtin one of the same
// name (priority order).
func NewBub(ctx context.Context, env *Env) (*cobra.Command, error) {
	root := &cobra.Command{
		Use:   "bub",
		Short: "Bub: a hook-first AI agent runtime on NATS JetStream",
		Long: `Bub runs tool-using LLM agents as a distributed event pipeline on NATS
JetStream and CloudEvents. Without --nats (or BUB_NATS_URL) every command
uses an embedded NATS server whose data lives in the bub home directory.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	app := &cliApp{root: root, log: env.Logger()}
	onboard := func(ctx context.Context, in hooks.OnboardConfigInput) (map[string]any, error) {
		return env.startup.Startup().OnboardConfig(ctx, in)
	}
	reg, err := env.startupRegistry(func(context.Context, hooks.CLIApp) error {
		app.add(
			newRun(env),
			newChat(env),
			newUp(env),
			newEvents(env),
			newStatus(env),
			newProvision(env),
			newHealthcheck(),
			newTape(env),
			newReplay(env),
			newHooks(env),
			newModels(env),
			newMCP(env),
			newOnboard(env.Getenv, onboard),
			newFakeLLM(),
			newBench(),
			newDLQ(env),
			newAnswer(env, true),
			newAnswer(env, false),
			newServiceCommand(env, workercmd.Service),
			newServiceCommand(env, ingresscmd.Service),
			newServiceCommand(env, recordercmd.Service),
			newServiceCommand(env, gatewaycmd.Service),
		)
		return nil
	})
	if err != nil {
		return nil, err
	}
	env.startup = reg
	if err := reg.Startup().RegisterCLICommands(ctx, hooks.RegisterCLICommandsInput{App: app}); err != nil {
		return nil, err
	}
	return root, nil
}
