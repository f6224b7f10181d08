// Package tape is Bub's tape: the append-only, per-session record every
// turn writes and later turns read back as model context. It holds the
// entry model, the query language, the store interfaces with their
// JetStream and in-memory implementations, the per-run [Fork], and the
// [Tape] handle tools and the agent loop use.
//
// Entry points:
//
//   - [Entry] and its constructors ([MessageEntry], [System], [Anchor],
//     [ToolCalls], [ToolResults], [ErrorEntry], [Event]); [ChatEntries]
//     turns one model interaction into entries in record_chat's order.
//   - [Query] (built from [All]) and [Query.Apply], the one definition of
//     what a query selects and of its errors.
//   - [Store] = [Reader] + [Appender] + [Resetter] + [Lister] + [Indexer];
//     optional [Archiver]. [JetStreamStore] is the production store
//     ([NewJetStreamStore]; every entry is a CloudEvent of type
//     [EntryEventType] on the tape's subject); [MemoryStore] is for unit tests. Both pass the
//     conformance suite in package tapetest. A store written outside this
//     package decides each append with [PlanAppend] (and [Index.Advance]
//     for entries it did not write), as MemoryStore does; see
//     examples/plugins/jsonltape for a JSONL directory store.
//   - [Index], kept per tape beside the entries (for [JetStreamStore], a
//     message of the same stream written in the same atomic batch as the
//     entries it commits, see [IndexEventType]): committed range, anchors,
//     commit ids and watermarks. [Indexer.WaitWatermark] gives
//     read-your-writes: the recorder appends with [WithWatermark] and a
//     worker waits, with a deadline, until the watermark covers the events
//     it needs.
//   - [Fork], the per-run overlay a worker reads and writes during a turn;
//     it answers queries exactly like a store holding parent + pending
//     entries and passes the same suite.
//   - [Tape] with [Context]: ReadMessages, Info, Anchors, Search, Handoff,
//     EnsureBootstrapAnchor, Reset, AppendEvent.
//   - [WriteJSONL] and [ReadJSONL] for Bub's tape file format.
//
// Guarantees every store gives: ids start at 1 per tape and after a reset;
// a batch is atomic (all or nothing visible, consecutive ids); a batch with
// a commit id is stored at most once; reads are copies.
//
// Decisions where Bub is silent or this port differs: a text query matches
// non-ASCII text (Bub's ASCII-escaped rendering never does); tape.search
// has no fuzzy matching and its output keeps non-ASCII text; a Fork
// filters its pending entries like a store would (Bub's applies only
// Kinds to them); all JSON is rendered like Python's
// json.dumps(ensure_ascii=False) but with sorted object keys; numbers are
// float64 (integers beyond 2^53 lose precision).
//
// Looking for the writer of tapes? See internal/recorder, and package
// taperec for how lifecycle events map to entries. For the tape.* tools see
// package tools/toolkit. For every NATS name used here see package
// subjects.
package tape
