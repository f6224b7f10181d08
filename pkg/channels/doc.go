// Package channels is Bub's channel contract: the
// interface a plugin's channel implements, the optional capabilities a
// channel may have, and the [Manager] that turns what provide_channels
// returns into the running channels of a gateway.
//
// A channel receives messages from somewhere (Telegram, a terminal, HTTP)
// and hands each to the [hooks.MessageHandler] it was given; the gateway
// publishes them to the inbound stream exactly like HTTP requests. Replies
// whose output_channel names the channel are delivered by its [Sender].
//
// [Select] picks the channels BUB_ENABLED_CHANNELS enables (Bub's
// enabled_channels()); [Buffer] is the per-session debounce of
// channels that ask for it; [Manager] starts the selected channels in
// order, routes their messages and stops them in reverse order.
//
// Start with [Channel]. Looking for the service that runs channels? See
// internal/gateway. Looking for the hook that provides channels? See
// hooks.ChannelProvider. For the Telegram channel see package
// channels/telegram.
package channels
