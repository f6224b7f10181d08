// Package jsretry says which JetStream errors are transient — those of a
// cluster electing a stream or consumer leader, or of several clients
// changing the topology at once — and retries an operation that meets
// them with bounded, jittered exponential backoff.
//
// Provisioning ([github.com/bubbus/bub/internal/natsx]), the tape store
// ([github.com/bubbus/bub/pkg/tape]) and ingress's publish share it, so
// the three agree on what "try again" means.
package jsretry
