// Package turnload is the load and the accounting the chaos suite
// (chaos/) and the compose cluster end-to-end test (e2e/compose, `make
// e2e-cluster`) share: turns posted over HTTP to ingress at a steady rate
// over a number of sessions, retried with the same id until accepted,
// while a fault runs; then, read back from JetStream, the replies and the
// tape entries of every turn, so a scenario can show that nothing was
// lost and nothing duplicated.
//
// [Run] runs one scenario and prints its summary line ([Result]); [FromEnv]
// sizes the load from environment variables; [Pace] lets the fault act
// at fractions of the load. The tapes are read without provisioning: the
// accounting never changes the topology it checks.
package turnload
