// Package stacktest runs a Bub cluster inside a test: an embedded
// nats-server (internal/natstest), the recorder and workers started by
// [stack.StartServices] exactly as `bub up` runs them, and a fake
// OpenAI-compatible model (internal/fakellm). Tests send turns through an
// ingress gateway and read what the cluster recorded: the tapes and the
// JetStream streams. Only tests import it.
package stacktest
