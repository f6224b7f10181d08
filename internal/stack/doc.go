// Package stack runs several services in one process for `bub up`, `bub
// run`, `bub chat` and the bench harness ([StartServices]), each over its
// own connection and through the same Run of its package as the service
// binaries, on the cluster of the configuration ([Open]: an existing
// cluster, or the embedded server under the bub home).
//
// It links every service and the embedded nats-server, so only the bub
// CLI imports it. Looking for a single service? See internal/workercmd,
// internal/ingresscmd, internal/recordercmd and internal/gatewaycmd (and
// internal/service, the shell they run in).
package stack
