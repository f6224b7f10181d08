package bubcmd

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/stack"
)

// runService connects a standalone service (which needs a NATS URL), runs
// body and drains the connection afterwards.
func runService(ctx context.Context, common *cli.Common, name string, log *slog.Logger, body func(*stack.Conn) error) error {
	stopTelemetry, err := setupTelemetry(ctx, common, name, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	cl, err := stack.Open(common, false, "", log)
	if err != nil {
		return err
	}
	defer cl.Shutdown()
	conn, err := cl.Connect(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	return body(conn)
}

// service describes one standalone service command (ingress, worker,
// recorder, gateway).
type service struct {
	name, short string
	// bind registers the service's own flags.
	bind func(fs *pflag.FlagSet)
	// prepare finishes the configuration before connecting (may be nil).
	prepare func(ctx context.Context) error
	// config is logged once at start (secrets redacted by LogValue).
	config func() []any
	// run serves on conn until ctx ends.
	run func(ctx context.Context, conn *stack.Conn, instance string, log *slog.Logger) error
}

// newServiceCommand builds the cobra command of a standalone service: the
// common flags, validation, logging and a drained NATS connection.
func newServiceCommand(env *Env, s service) *cobra.Command {
	getenv := env.Getenv
	var common cli.Common
	cmd := &cobra.Command{
		Use:          s.name,
		Short:        s.short,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := common.Validate(); err != nil {
				return err
			}
			if s.prepare != nil {
				if err := s.prepare(cmd.Context()); err != nil {
					return err
				}
			}
			log := common.Logger(cmd.ErrOrStderr()).With("service", s.name)
			log.Info(s.name+".config", append([]any{"nats", common.NATS}, s.config()...)...)
			return runService(cmd.Context(), &common, s.name, log, func(conn *stack.Conn) error {
				return s.run(cmd.Context(), conn, cli.Instance(getenv), log)
			})
		},
	}
	common.Bind(cmd.Flags(), getenv)
	if s.bind != nil {
		s.bind(cmd.Flags())
	}
	return cmd
}
