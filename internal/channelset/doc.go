// Package channelset is the set of channels the builtin plugin provides
// (provide_channels, [Builtin]): telegram, cli and http. The worker (for
// admission), the gateway (to run them) and the bub CLI take it; the
// ingress and the recorder do not, so their binaries do not link the
// telegram channel.
//
// Looking for the channels themselves? See pkg/channels and
// pkg/channels/telegram.
package channelset
