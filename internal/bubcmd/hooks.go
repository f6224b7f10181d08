package bubcmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/workercmd"
)

func newHooks(env *Env) *cobra.Command {
	getenv := env.Getenv
	common := cli.Common{Quiet: true}
	var wo workercmd.Options
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Show every hook implementation in the order it runs",
		Long: `Builds the hook registry exactly as a worker does (the builtin plugin,
then configured plugins and remote interceptors) and prints, per hook, the
implementations in the order they actually run (highest priority first),
marking the one that answers a firstresult hook first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workercmd.Load(getenv, &wo); err != nil {
				return err
			}
			wo.MCP = nil // MCP servers bring tools, not hooks
			return withClient(cmd.Context(), &common, getenv, func(ctx context.Context, c *client) error {
				wo.Instance = cli.Instance(getenv)
				rt, err := workercmd.NewRuntime(ctx, c.conn, wo, c.log)
				if err != nil {
					return err
				}
				defer func() { _ = rt.Close(context.WithoutCancel(ctx)) }()
				fmt.Fprint(cmd.OutOrStdout(), rt.Hooks().Report().String())
				return nil
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	workercmd.Bind(cmd.Flags(), &wo, env.Env)
	return cmd
}
