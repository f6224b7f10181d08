// Package jsretry says which JetStream errors are transient — those of a
// cluster electing a stream or consumer leader, or of several clients
// changing the topology at once — and retries an operation that meets
// them with bounded, jittered exponential backoff. [Follow] reads a
// stream's new messages in order and comes back within about a second
// when its consumer's server is lost.
//
// Provisioning ([github.com/bubbus/bub/internal/natsx]), the tape store
// ([github.com/bubbus/bub/pkg/tape]) and ingress's publish share it, so
// the three agree on what "try again" means; ingress follows its replies
// and the tape store its index with [Follow].
package jsretry
