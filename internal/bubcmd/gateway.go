package bubcmd

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/hooks"
)

// gatewayFlags are the flags of the gateway, shared by `bub gateway` and
// `bub up`.
type gatewayFlags struct {
	enabled []string
}

// bind registers --enable-channel (repeatable; default
// BUB_ENABLED_CHANNELS or enabled_channels in config.yaml, else all).
func (f *gatewayFlags) bind(fs *pflag.FlagSet, env *Env) {
	fs.StringArrayVar(&f.enabled, "enable-channel", []string{enabledDefault(env)},
		"channel to run, repeatable or a comma list; all = every regular channel, !name excludes one (env BUB_ENABLED_CHANNELS)")
}

// enabledDefault is BUB_ENABLED_CHANNELS (which a list or string
// enabled_channels in config.yaml stands for), "" when the file sets
// enabled_channels empty (nothing enabled, as in Bub), else "all".
func enabledDefault(env *Env) string {
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

// options returns the gateway options of the flags and the environment:
// the channels of the startup registry's provide_channels, debounce from
// BUB_DEBOUNCE_SECONDS, BUB_MAX_WAIT_SECONDS and BUB_ACTIVE_TIME_WINDOW.
func (f *gatewayFlags) options(env *Env) (stack.GatewayOptions, error) {
	buf, err := bufferFromEnv(env.Getenv)
	if err != nil {
		return stack.GatewayOptions{}, err
	}
	p, err := env.channelProvider()
	if err != nil {
		return stack.GatewayOptions{}, err
	}
	return stack.GatewayOptions{
		Enabled:       strings.Join(f.enabled, ","),
		Channels:      p,
		Buffer:        buf,
		ShutdownGrace: cli.DurationFromEnv(env.Getenv, "BUB_SHUTDOWN_GRACE", 0),
	}, nil
}

// channelProvider returns provide_channels of the builtin plugin and the
// build's plugins.
func (env *Env) channelProvider() (gateway.Provider, error) {
	reg, err := env.startupHooks()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, h hooks.MessageHandler) ([]hooks.Channel, error) {
		return reg.Startup().Channels(ctx, hooks.ProvideChannelsInput{Handler: h})
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

// transportChannels returns the names of the selected channels that have a
// transport of their own, i.e. all but the builtin http (served by
// ingress) and cli (served by `bub chat`) channels: `bub up` runs a
// gateway only for them.
func transportChannels(selected []channels.Channel) []string {
	var out []string
	for _, ch := range selected {
		if n := ch.Name(); n != channels.HTTPName && n != channels.CLIName {
			out = append(out, n)
		}
	}
	return out
}

// NewGateway returns the gateway service command.
func NewGateway(env *Env) *cobra.Command {
	var f gatewayFlags
	var o stack.GatewayOptions
	return newServiceCommand(env, service{
		name:  "gateway",
		short: "Run the enabled channels: publish what they receive, deliver the replies addressed to them",
		bind:  func(fs *pflag.FlagSet) { f.bind(fs, env) },
		prepare: func(ctx context.Context) error {
			var err error
			if o, err = f.options(env); err != nil {
				return err
			}
			_, err = gateway.Selected(ctx, o.Channels, o.Enabled)
			return err
		},
		config: func() []any { return []any{"enabled_channels", o.Enabled, "debounce", o.Buffer} },
		run: func(ctx context.Context, conn *stack.Conn, instance string, log *slog.Logger) error {
			o.Instance = instance
			return stack.RunGateway(ctx, conn, o, log)
		},
	})
}
