// Package tapetest is the conformance suite every tape store passes: call
// [Run] from a test with a constructor of fresh stores.
//
// It pins the store contract of package tape: ids from 1 per tape and after
// a reset, atomic batches, idempotent commit ids, every query filter with
// Bub's exact error messages, listing, resets, watermarks and
// WaitWatermark, concurrent appends that never interleave, archives (for
// stores that implement tape.Archiver) and the Tape handle on top.
//
// [FillBenchTape] and [ReadMessagesBenchmark] are the context-read
// benchmark that package tape's `go test -bench` and `bub bench` (figure
// P5) both run.
//
// Looking for the stores themselves? See package tape (MemoryStore,
// JetStreamStore, Fork).
package tapetest
