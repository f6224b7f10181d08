package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/skills"
)

// Env is what a service is built from: the environment (flags take their
// defaults from it) and the plugins of this build, registered after the
// builtin plugin in order, so the last has the highest priority.
type Env struct {
	Getenv cli.Getenv
	// Plugins are none in a service binary; `bub <service>` of a custom
	// build (pkg/app) passes its plugins.
	Plugins []hooks.Plugin
	// Lookup resolves a dotted configuration path (env BUB_<PATH> over
	// <home>/config.yaml), for skills' ${config.…}.
	Lookup skills.Lookup
	// Log receives the startup hooks' warnings (nil = stderr at warn).
	Log *slog.Logger
}

// Logger returns Log, or a logger to stderr at warn when it is nil.
func (e Env) Logger() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Spec describes one service (worker, ingress, recorder, gateway): what
// cmd/<name> and `bub <name>` both run.
type Spec struct {
	// Name is the service's name: the command, the connection name and
	// the telemetry service name.
	Name string
	// Short is the one-line help.
	Short string
	// Bind registers the service's own flags (may be nil).
	Bind func(fs *pflag.FlagSet)
	// Prepare finishes the configuration once the flags are parsed,
	// before connecting (may be nil).
	Prepare func(ctx context.Context) error
	// Config is logged once at start (secrets redacted by LogValue; may
	// be nil).
	Config func() []any
	// Run serves on conn until ctx ends, then drains.
	Run func(ctx context.Context, conn *Conn, instance string, log *slog.Logger) error
}

// BindFlags registers the common flags (into common) and the service's
// own on fs, with defaults from getenv. A service never embeds a server,
// so its --nats is required.
func (s Spec) BindFlags(fs *pflag.FlagSet, common *cli.Common, getenv cli.Getenv) {
	common.Bind(fs, getenv)
	common.BindTopology(fs, getenv)
	fs.Lookup("nats").Usage = "NATS URL of the cluster, required: a service never embeds a server (env BUB_NATS_URL)"
	if s.Bind != nil {
		s.Bind(fs)
	}
}

// Run runs s with the parsed common settings: it validates them, finishes
// s's configuration, logs it to stderr, starts telemetry, dials NATS,
// announces s as a NATS micro service ([Conn.Announce]), runs s until ctx
// ends, then stops the micro service, drains the connection and flushes
// telemetry.
func Run(ctx context.Context, common *cli.Common, s Spec, getenv cli.Getenv, stderr io.Writer) error {
	if err := common.Validate(); err != nil {
		return err
	}
	if s.Prepare != nil {
		if err := s.Prepare(ctx); err != nil {
			return err
		}
	}
	log := common.Logger(stderr).With("service", s.Name)
	config := []any{"nats", common.NATS}
	if s.Config != nil {
		config = append(config, s.Config()...)
	}
	log.Info(s.Name+".config", config...)
	stopTelemetry, err := StartTelemetry(ctx, common, s.Name, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	conn, err := Dial(ctx, common, s.Name, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	instance := cli.Instance(getenv)
	if err := conn.Announce(s.Name, instance); err != nil {
		return err
	}
	// A connection closed for good ends the service with ErrConnClosed,
	// so that it exits non-zero and is restarted.
	err = conn.RunUntilClosed(ctx, func(ctx context.Context) error { return s.Run(ctx, conn, instance, log) })
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped (SIGTERM, Ctrl-C) before it was serving: a stop, not a
		// failure.
		log.Info(s.Name+".stopped_while_starting", "err", err)
		return nil
	}
	return err
}
