// Package gatewaycmd is the gateway service as cmd/gateway, `bub gateway`
// and `bub up` run it: its flags ([Flags]: the enabled channels and the
// debounce settings), its [service.Spec] ([Service]) and how it runs on a
// connection ([Run]). The channels are those of provide_channels: the
// builtin plugin's (internal/channelset) and the build's plugins'.
//
// Looking for how channels are run and replies delivered? See
// internal/gateway. For the shell around it see internal/service.
package gatewaycmd
