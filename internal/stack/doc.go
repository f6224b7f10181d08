// Package stack connects a service to NATS the way its configuration says
// ([Open]: an existing cluster, or the embedded server under the bub home)
// and runs several services in one process for `bub up` and `bub run`
// ([RunAll]) over the same code paths as the distributed deployment.
//
// Looking for a single service? See internal/ingress, internal/worker,
// internal/recorder, internal/gateway.
package stack
