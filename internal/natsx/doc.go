// Package natsx is the NATS plumbing every service shares: connecting with
// credentials ([Connect]) and idempotent creation of every stream,
// consumer and KV bucket ([EnsureTopology]).
//
// Looking for the names themselves? See pkg/subjects. The embedded
// nats-server of the bub CLI is package natsx/embedded (kept apart so the
// service binaries do not link the server); for a server in tests see
// internal/natstest.
package natsx
