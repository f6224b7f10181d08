// Package channels is Bub's channel contract (catalogue §9.1): the
// interface a plugin's channel implements, the optional capabilities a
// channel may have, and the [Manager] that turns what provide_channels
// returns into the running channels of a gateway.
//
// A channel receives messages from somewhere (Telegram, a terminal, HTTP)
// and hands each to the [hooks.MessageHandler] it was given; the gateway
// publishes them to the inbound stream exactly like HTTP requests. Replies
// whose output_channel names the channel are delivered by its [Sender].
//
// Start with [Channel]. Looking for the hook that provides channels? See
// hooks.ChannelProvider. For the Telegram channel see package
// channels/telegram.
package channels
