// Package jsonltape is an example plugin that provides a second tape
// store: a directory of JSONL files like Python Bub's default
// FileTapeStore. [Plugin] implements provide_tape_store
// (hooks.TapeStoreProvider[tape.Store]) and hands every runtime scope a
// [Store], which passes the conformance suite of package tapetest.
//
// Entry points: [New] or [FromEnv] ($BUB_JSONL_TAPE_DIR) for the plugin,
// [NewStore] for the store itself.
//
// # Files
//
// A tape named name lives in <dir>/<base>.jsonl, one entry per line as
// {"id", "kind", "payload", "meta", "date"} (package tape's WriteJSONL and
// ReadJSONL: Bub's format, non-ASCII kept). The base is the tape name with
// every byte other than a-z, 0-9, '_' and '-' written as %XX (uppercase
// hex): the mapping is injective also on case-insensitive file systems,
// and Bub's session tape names (md5 hex "__" md5 hex) keep their names, so
// the directory of a Python Bub can be opened as is. Escaped names longer
// than 200 bytes, and the empty name, are refused. Beside it:
//
//   - <base>.index.json, the sidecar: the tape's index (commit ids,
//     watermarks, anchors), its revision and the length of the tape file it
//     covers; replaced atomically (temp file, fsync, rename, directory
//     fsync).
//   - <base>.lock, locked with flock(2) by every access: shared for reads,
//     exclusive for writes. Never removed.
//   - archive/<base>.jsonl.<UTC YYYYMMDDTHHMMSSZ>.bak, written by Archive
//     (Bub's archive name).
//   - <base>.index.json.tmp and <base>.jsonl.reset, the next sidecar and
//     the next tape file while a write is under way.
//
// # Guarantees
//
// Reads are incremental: each access reads only the lines added since the
// last one (a cache and a byte offset); a file that shrank or was
// replaced is read again from the start. Blank lines, bad JSON and invalid
// records are skipped like Bub does; a line still being written is read
// once it ends with a newline.
//
// An append is one write(2) of all the batch's lines, fsynced before
// Append returns, with ids last id + 1, + 2, …; a reset writes the new
// content to <base>.jsonl.reset and renames it over the tape file. The
// sidecar records each write before the tape file changes, so a process
// that dies half-way leaves a write the next access completes (its lines
// are all there) or undoes (the file is cut back): readers see a batch
// whole or not at all, and a commit id is stored at most once. An Append
// that fails after its lines were synced but before the sidecar was
// replaced returns an error although the batch is committed; its commit id
// makes the retry a no-op (the recorder always sets one).
//
// Within a process a mutex per tape serializes accesses; across processes
// on one host the flock does, so several Bub processes (or Store values)
// may share the directory. Other programs may append lines (as Bub's
// FileTapeStore does) or delete a tape file; those entries are indexed
// without commit ids, and a deleted file is an empty tape keeping its
// watermarks. Writing tape files while this store writes them, or sharing
// the directory over a network file system without working flock, is not
// supported.
//
// WaitWatermark is woken at once by appends through the same Store and
// otherwise reads the index every poll interval ([WithPollInterval],
// default [DefaultPollInterval]) until its ctx ends.
//
// # Where it differs from Bub
//
// List returns every tape with entries, sidecar tapes included (Bub lists
// only file names with exactly one "__"); a reset leaves an empty file
// instead of deleting it; text search is the one of package tape (no
// fuzzy matching, oldest first).
//
// Looking for the production store? See tape.JetStreamStore, the default
// when no plugin provides one. For the hook see package hooks
// (provide_tape_store).
package jsonltape
