package bubcmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

func newModels(env *Env) *cobra.Command {
	var session, workspace string
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models every plugin offers (provide_runtime_options), in priority order",
		Long: `Calls provide_runtime_options on the builtin plugin and every plugin of this
build and prints the models they offer in priority order, marking the
current one with "*". ",model" without an argument prints the same list
inside a session.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := env.startupHooks()
			if err != nil {
				return err
			}
			opts, err := reg.RuntimeOptions(cmd.Context(), hooks.RuntimeOptionsInput{SessionID: session, Workspace: workspace})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), toolkit.FormatModels(opts.Models, opts.Current))
			return nil
		},
	}
	wd, _ := os.Getwd()
	cmd.Flags().StringVar(&session, "session", "", "session the options are for")
	cmd.Flags().StringVar(&workspace, "workspace", cli.EnvOr(env.Getenv, "BUB_WORKSPACE", wd), "workspace the options are for (env BUB_WORKSPACE)")
	return cmd
}
