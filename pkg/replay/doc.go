// Package replay re-runs the recorded turns of a session tape through the
// agent loop and hooks of the current build, answering each model call
// with the model's answer the recording holds, and compares the two: the
// outbound text, the tool calls with their arguments and results, and the
// hook decisions. It is `bub replay` and, through package
// replay/replaytest, a plugin author's `go test` on a real production tape.
//
// Start with [Session] (a whole tape) or [New] and [Replayer.Replay] (one
// [Turn] of [Turns]). [Lines] renders a run's tape entries for the
// comparison; both sides are rendered from entries, the replayed ones
// mapped from the run's events by the recorder's own mapping (package
// taperec). What replay does and does not do is written in
// docs/durable.md ("Replay").
//
// A replay never runs a tool: a call the hooks let through is answered with
// the result recorded for the same call (same step, same position, same
// tool); any other call — the current build, or the live model
// ([Options.Models]), asked for something else — is denied and reported as
// a divergence, and the turn goes on.
package replay
