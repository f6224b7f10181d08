// Package e2e drives the built binaries (bub, ingress, worker, recorder,
// the example interceptors) as separate processes on loopback, like a
// user: HTTP in, replies out, tapes read back. `make test` builds the
// binaries into ./bin and points BUB_BIN_DIR at it; without it the tests
// build what they need into a temporary directory.
package e2e
