// Package natsx is the NATS plumbing every service shares: connecting with
// credentials ([Connect]), the embedded nats-server used when no URL is
// configured ([StartEmbedded]), and idempotent creation of every stream,
// consumer and KV bucket ([EnsureTopology]).
//
// Looking for the names themselves? See pkg/subjects. For a server in tests
// see internal/natstest.
package natsx
