package bubcmd

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/stack"
)

// bindIngress registers the HTTP API flags.
func bindIngress(fs *pflag.FlagSet, c *ingress.Config, getenv cli.Getenv) {
	fs.StringVar(&c.Addr, "http", cli.EnvOr(getenv, "BUB_HTTP_ADDR", "127.0.0.1:8080"), "HTTP listen address (env BUB_HTTP_ADDR)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body", 1<<20, "maximum request body in bytes")
	fs.StringVar(&c.Token, "token", getenv("BUB_INGRESS_TOKEN"), "bearer token required from clients (env BUB_INGRESS_TOKEN)")
	fs.DurationVar(&c.MaxWait, "max-wait", 5*time.Minute, "upper bound of ?wait=")
	c.ShutdownGrace = cli.DurationFromEnv(getenv, "BUB_SHUTDOWN_GRACE", 0)
}

// NewIngress returns the ingress service command.
func NewIngress(env *Env) *cobra.Command {
	getenv := env.Getenv
	var o stack.IngressOptions
	return newServiceCommand(env, service{
		name:   "ingress",
		short:  "Accept envelopes over HTTP and publish them to NATS",
		bind:   func(fs *pflag.FlagSet) { bindIngress(fs, &o.HTTP, getenv) },
		config: func() []any { return []any{"http", o.HTTP} },
		run: func(ctx context.Context, conn *stack.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return stack.RunIngress(ctx, conn, o, log)
		},
	})
}
