// Package chaos is Bub's chaos suite: it drives the built binaries
// (ingress, workers, recorder, interceptors, and `bub up --services=` as
// the NATS server) as separate processes on loopback and breaks them while
// turns flow: SIGKILL of random workers, a killed and restarted recorder,
// a restarted NATS server (file store kept), a cluster of three
// nats-server processes (built from the nats-server module) with R3
// streams whose inbound stream leader is killed and restarted, and slow,
// dead and garbage-answering interceptors. Every scenario prints one summary line
// (turns sent, replies, duplicates, lost, tape entries expected vs found,
// interrupted runs, time to recover) and fails unless nothing was lost
// and nothing was duplicated.
//
// The tests carry the build tag "chaos": run them with `make chaos`
// (BUB_CHAOS_TURNS, BUB_CHAOS_SESSIONS and BUB_CHAOS_RATE size the load;
// the default is 1,000 turns over 50 sessions). The misbehaving
// interceptor is cmd/chaoshook. Process handling is internal/proctest.
package chaos
