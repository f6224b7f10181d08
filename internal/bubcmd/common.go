package bubcmd

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/service"
)

// newServiceCommand returns `bub <name>` of the service newSpec builds:
// the flags and the run of the service binary cmd/<name>, through the
// same shell (service.Run).
func newServiceCommand(env *Env, newSpec func(service.Env) service.Spec) *cobra.Command {
	s := newSpec(env.Env)
	var common cli.Common
	cmd := &cobra.Command{
		Use:          s.Name,
		Short:        s.Short,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return service.Run(cmd.Context(), &common, s, env.Getenv, cmd.ErrOrStderr())
		},
	}
	s.BindFlags(cmd.Flags(), &common, env.Getenv)
	return cmd
}

// printReport prints report to w as indented JSON when asJSON is set, else
// as text.
func printReport[T any](w io.Writer, asJSON bool, report T, text func(io.Writer, T)) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	text(w, report)
	return nil
}
