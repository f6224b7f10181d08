package gatewaycmd

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/channelset"
	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/hooks"
)

// Flags are the flags of the gateway, shared by the gateway and `bub up`.
type Flags struct {
	Enabled []string
}

// Bind registers --enable-channel (repeatable; default
// BUB_ENABLED_CHANNELS or enabled_channels in config.yaml, else all).
func (f *Flags) Bind(fs *pflag.FlagSet, env service.Env) {
	fs.StringArrayVar(&f.Enabled, "enable-channel", []string{enabledDefault(env)},
		"channel to run, repeatable or a comma list; all = every regular channel, !name excludes one (env BUB_ENABLED_CHANNELS)")
}

// enabledDefault is BUB_ENABLED_CHANNELS (which a list or string
// enabled_channels in config.yaml stands for), "" when the file sets
// enabled_channels empty (nothing enabled, as in Bub), else "all".
func enabledDefault(env service.Env) string {
	if v := env.Getenv("BUB_ENABLED_CHANNELS"); v != "" {
		return v
	}
	if env.Lookup != nil {
		if v, ok := env.Lookup("enabled_channels"); ok && v != nil {
			return ""
		}
	}
	return "all"
}

// Options returns the gateway options of the flags and env: the channels
// of provide_channels (the builtin plugin's and env's plugins'), debounce
// from BUB_DEBOUNCE_SECONDS, BUB_MAX_WAIT_SECONDS and
// BUB_ACTIVE_TIME_WINDOW.
func (f *Flags) Options(env service.Env) (Options, error) {
	buf, err := bufferFromEnv(env.Getenv)
	if err != nil {
		return Options{}, err
	}
	log := env.Logger()
	reg, err := builtin.StartupRegistry(builtin.Startup{Channels: channelset.Builtin(env.Getenv, log)}, env.Plugins, log)
	if err != nil {
		return Options{}, err
	}
	provide := func(ctx context.Context, h hooks.MessageHandler) ([]hooks.Channel, error) {
		return reg.Startup().Channels(ctx, hooks.ProvideChannelsInput{Handler: h})
	}
	return Options{
		Enabled:       strings.Join(f.Enabled, ","),
		Channels:      provide,
		Buffer:        buf,
		ShutdownGrace: cli.DurationFromEnv(env.Getenv, "BUB_SHUTDOWN_GRACE", 0),
	}, nil
}

// bufferFromEnv reads the debounce settings, in seconds as in Bub.
func bufferFromEnv(getenv cli.Getenv) (channels.BufferConfig, error) {
	var c channels.BufferConfig
	for _, s := range []struct {
		key string
		d   *time.Duration
	}{
		{"BUB_DEBOUNCE_SECONDS", &c.Debounce},
		{"BUB_MAX_WAIT_SECONDS", &c.MaxWait},
		{"BUB_ACTIVE_TIME_WINDOW", &c.ActiveWindow},
	} {
		v := getenv(s.key)
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1e6 {
			return c, fmt.Errorf("%s=%q: want a positive number of seconds such as 1.5", s.key, v)
		}
		*s.d = time.Duration(f * float64(time.Second))
	}
	return c, c.Validate()
}

// Service returns the gateway service. With no channel enabled it fails
// before connecting, with gateway.ErrNoChannels.
func Service(env service.Env) service.Spec {
	var f Flags
	var o Options
	return service.Spec{
		Name:  "gateway",
		Short: "Run the enabled channels: publish what they receive, deliver the replies addressed to them",
		Bind:  func(fs *pflag.FlagSet) { f.Bind(fs, env) },
		Prepare: func(ctx context.Context) error {
			var err error
			if o, err = f.Options(env); err != nil {
				return err
			}
			_, err = gateway.Selected(ctx, o.Channels, o.Enabled)
			return err
		},
		Config: func() []any { return []any{"enabled_channels", o.Enabled, "debounce", o.Buffer} },
		Run: func(ctx context.Context, conn *service.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return Run(ctx, conn, o, log)
		},
	}
}
