package channelset

import (
	"context"
	"log/slog"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/channels/telegram"
	"github.com/bubbus/bub/pkg/hooks"
)

// Builtin returns the builtin plugin's provide_channels: the telegram
// channel (enabled iff BUB_TELEGRAM_TOKEN is set), the cli channel (`bub
// chat`) and the http channel (the ingress API).
func Builtin(getenv func(string) string, log *slog.Logger) hooks.ChannelsFunc {
	return func(_ context.Context, handler hooks.MessageHandler) ([]hooks.Channel, error) {
		cfg, err := telegram.ConfigFromEnv(getenv)
		if err != nil {
			return nil, err
		}
		tg, err := telegram.New(cfg, handler, log)
		if err != nil {
			return nil, err
		}
		return []hooks.Channel{tg, channels.CLI{}, channels.HTTP{}}, nil
	}
}
