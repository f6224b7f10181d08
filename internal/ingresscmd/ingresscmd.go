package ingresscmd

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/service"
)

// Bind registers the HTTP API flags (shared by the ingress and `bub up`).
func Bind(fs *pflag.FlagSet, c *ingress.Config, getenv cli.Getenv) {
	fs.StringVar(&c.Addr, "http", cli.EnvOr(getenv, "BUB_HTTP_ADDR", "127.0.0.1:8080"), "HTTP listen address (env BUB_HTTP_ADDR)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body", 1<<20, "maximum request body in bytes")
	fs.StringVar(&c.Token, "token", getenv("BUB_INGRESS_TOKEN"), "bearer token required from clients (env BUB_INGRESS_TOKEN)")
	fs.DurationVar(&c.MaxWait, "max-wait", 5*time.Minute, "upper bound of ?wait=")
	c.ShutdownGrace = cli.DurationFromEnv(getenv, "BUB_SHUTDOWN_GRACE", 0)
}

// Service returns the ingress service.
func Service(env service.Env) service.Spec {
	var o Options
	return service.Spec{
		Name:   "ingress",
		Short:  "Accept envelopes over HTTP and publish them to NATS",
		Bind:   func(fs *pflag.FlagSet) { Bind(fs, &o.HTTP, env.Getenv) },
		Config: func() []any { return []any{"http", o.HTTP} },
		Run: func(ctx context.Context, conn *service.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return Run(ctx, conn, o, log)
		},
	}
}
