package bubcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// NewBub returns the bub CLI.
func NewBub(getenv cli.Getenv) *cobra.Command {
	root := &cobra.Command{
		Use:   "bub",
		Short: "Bub: a hook-first AI agent runtime on NATS JetStream",
		Long: `Bub runs tool-using LLM agents as a distributed event pipeline on NATS
JetStream and CloudEvents. Without --nats (or BUB_NATS_URL) every command
uses an embedded NATS server whose data lives in the bub home directory.`,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newRun(getenv),
		newChat(getenv),
		newUp(getenv),
		newEvents(getenv),
		newStatus(getenv),
		newHealthcheck(getenv),
		newTape(getenv),
		newHooks(getenv),
		newFakeLLM(getenv),
		newBench(getenv),
		newDLQ(getenv),
		newOnboard(getenv, builtinOnboard),
	)
	return root
}

// builtinOnboard runs onboard_config on a registry holding only the
// builtin plugin.
// TODO(lead): pass the startup registry's Startup().OnboardConfig instead
// once pkg/app threads plugins through.
func builtinOnboard(ctx context.Context, in hooks.OnboardConfigInput) (map[string]any, error) {
	p, err := builtin.New(builtin.Options{})
	if err != nil {
		return nil, err
	}
	reg := hooks.New[tape.Store, tape.Context]()
	if err := reg.Register(p); err != nil {
		return nil, err
	}
	return reg.Startup().OnboardConfig(ctx, in)
}
