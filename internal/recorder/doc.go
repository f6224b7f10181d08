// Package recorder is the only tape writer. It consumes lifecycle events
// from the events stream, maps them to tape entries with package taperec,
// and commits each run's entries to its session's tape in one atomic,
// idempotent batch when the run finishes (Bub's per-turn fork with
// merge-back). Events stay unacknowledged until their run is committed, so
// a recorder restart loses nothing; a run whose worker died is recorded as
// interrupted and none of its partial entries enter later context.
//
// Start with [Recorder.Run]; run.go holds a run's buffer and the commit.
// Looking for the entry mapping? See package taperec. For the store see
// package tape.
package recorder
