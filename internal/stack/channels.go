package stack

import (
	"context"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/hooks"
)

// BuiltinChannels returns the builtin plugin's provide_channels: the http
// channel (the ingress API) and the cli channel (`bub chat`).
func BuiltinChannels(getenv func(string) string) func(context.Context, hooks.MessageHandler) ([]hooks.Channel, error) {
	return func(context.Context, hooks.MessageHandler) ([]hooks.Channel, error) {
		return []hooks.Channel{channels.HTTP{}, channels.CLI{}}, nil
	}
}
