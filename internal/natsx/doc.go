// Package natsx is the NATS plumbing every service shares: connecting with
// credentials ([Connect]) and the JetStream topology: every stream (the
// tape stream of pkg/tape included), KV bucket and shared durable
// consumer, sized by [Topology] (replicas, placement, limits).
//
// [Apply] provisions it (create what is missing, update what differs,
// one log line each, transient errors retried with backoff within
// [EnsureBound]), checks it without changing anything (operator mode,
// BUB_PROVISION=false: the error names what is missing or differs) or
// dry-runs it (`bub provision --dry-run`). Services run
// [EnsureTopologyLogged] at start.
//
// [Handled] lets a caller wait until an asynchronous subscription's
// handler has caught up with what the connection received (bub chat
// prints every streamed delta before the reply).
//
// Looking for the names themselves? See pkg/subjects. The embedded
// nats-server of the bub CLI is package natsx/embedded (kept apart so the
// service binaries do not link the server); for a server in tests see
// internal/natstest (StartCluster for a 3-server cluster).
package natsx
