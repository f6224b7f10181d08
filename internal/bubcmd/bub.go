package bubcmd

import (
	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
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
	)
	return root
}
