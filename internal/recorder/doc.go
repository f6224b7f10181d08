// Package recorder is the only tape writer. It consumes lifecycle events
// from the events stream, maps them to tape entries with package taperec,
// and commits each run's entries to its session's tape in one atomic,
// idempotent batch when the run finishes (Bub's per-turn fork with
// merge-back). Events stay unacknowledged until their run is committed, so
// a recorder restart loses nothing; a run whose worker died is recorded as
// interrupted and none of its partial entries enter later context.
//
// Event types the recorder does not know (events.DecodePayload gives
// events.ErrUnknownType: another application's events, or custom ones a
// worker's bridge publishes through its codec's events.Registry, which
// this process cannot know) are not recorded. One with a run id and a seq
// still takes its place in the run: it is held, no entries, and
// acknowledged with the run's commit, so the run's seq numbers have no
// gap and it completes. One without a run id or without a seq (below 1)
// is acknowledged at once. Events the recorder cannot record as they were
// meant are dead-lettered as invalid (dlq.ReasonInvalid) instead: a known
// type whose data does not decode, and a handoff or tape.reset whose data
// holds a value of the wrong type (taperec.Check), and an event of a run
// without a seq (a run end among them still moves the session's events
// watermark past it, as far as held runs allow: a turn waits for the
// newest stored run end). One of a run with a seq keeps its place in the run, as an
// unknown one does, so the run is recorded without it at once instead of
// held (and the session's events watermark with it) until Config.IdleRun
// and then recorded as interrupted. A dead-lettered RunFinished or
// CommandFinished still ends its run (its type and seq say where): the run
// is recorded without it and, its status unknown, claims no envelope. A
// dead-lettered event of a run is held with the run and acknowledged with
// its commit, so a recorder that restarts meanwhile gets it again; its
// dead letter's id is its stream sequence (dlq.Writer.Hold), so it is
// stored once.
//
// A complete run, or an event of no run (the CLI's handoff), whose commit
// fails (the tape's stream has no leader, a timeout) stays held and is committed again every second, its events
// kept alive: its end keeps the session's events watermark below it, so
// no commit of a later run of the session lets a turn read a tape without
// it, and its own commit then moves the watermark past every run
// committed meanwhile.
//
// The session's events watermark passes every stored copy of a committed
// run's events: a redelivery, a copy stored twice (published again outside
// the dedupe window) and a dead-lettered copy, whether it comes before the
// commit (held with the run, no entries) or after it. A turn waits for the
// newest copy of its session's last run end, which would otherwise hold it
// for the read-your-writes bound. A run (or an event of no run) whose
// commit the tape holds already (a recorder that lost its
// acknowledgements gets it again, or it was stored twice) is not
// recorded again, and the watermark still passes it; its later events are
// taken as late copies. A run end that comes while its run is incomplete
// is checked against the tape at once: a late copy of a committed run's
// end, seen by a restarted recorder, would otherwise be held until
// IdleRun with the session's watermark below it.
//
// A run whose commit the server refuses as larger than its max_payload
// (nats.ErrMaxPayload: the limit was lowered after its events were
// stored, or an event left less than events.EntryReserve of it) would
// fail however often it is retried, holding the session's watermark: it
// is recorded as interrupted (reason payload_too_large, the error in the
// marker) and its events are acknowledged.
//
// Start with [Recorder.Run]; run.go holds a run's buffer and the commit.
// Looking for the entry mapping? See package taperec. For the store see
// package tape.
package recorder
