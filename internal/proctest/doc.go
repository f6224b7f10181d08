// Package proctest runs this repository's binaries as separate processes
// in tests: it builds them once (or takes them from BUB_BIN_DIR, as `make
// test` sets it), starts them with extra environment, keeps their output
// (logged when the test fails), and stops them with SIGTERM or SIGKILL.
//
// Start with [Start] and [Binary]; [FreeAddr] picks a loopback port. The
// chaos suite (chaos/) uses it; e2e/ has its own older harness.
package proctest
