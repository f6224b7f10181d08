// Package embedded runs the in-process nats-server with JetStream that the
// bub CLI uses when no NATS URL is configured ([Start]; `bub up`, `bub run`,
// `bub chat`, the bench harness).
//
// It is its own package so that only what embeds a server links
// nats-server: the service binaries (cmd/worker, cmd/ingress, …) always
// dial a cluster through package natsx and never import this one (the
// rule test in internal/depsrule holds that). Looking for a server in
// tests? See internal/natstest.
package embedded
