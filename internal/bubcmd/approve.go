package bubcmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/agent"
)

// newAnswer is `bub approve` (approve true) or `bub deny`.
func newAnswer(env *Env, approve bool) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	var reason string
	use, short := "approve ID", "Approve a tool call that waits for a person's approval"
	if !approve {
		use, short = "deny ID", "Deny a tool call that waits for a person's approval"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: `A before_tool_call hook that asks (docs/hooks.md, "Approvals") parks the
tool call until it is answered or its deadline passes. ID is the
approval's id, from its approval.requested event or from bub chat. An
approval is answered once: a second answer is refused with how the first
one ended.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				store, err := approvals.Open(ctx, c.conn.JS, c.conn.Names)
				if err != nil {
					return err
				}
				a, err := store.Answer(ctx, args[0], approve, reason, "cli")
				if err != nil {
					return err
				}
				printAnswered(cmd.OutOrStdout(), a)
				return nil
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown to the model with a denial)")
	return cmd
}

func printAnswered(w io.Writer, a agent.Approval) {
	fmt.Fprintf(w, "approval %s: %s (tool %s, session %s)\n", a.ID, a.Status, a.Tool, a.SessionID)
}
