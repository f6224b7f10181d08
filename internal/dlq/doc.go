// Package dlq copies messages a service cannot process to the dead-letter
// stream (bub.dlq.<reason>) with the reason, the error and the original
// subject and headers, so nothing is ever silently dropped.
//
// Start with [Writer.Reject] (copy and terminate) or [Writer.Hold] (copy
// and leave the message to its consumer). Listing and replaying dead
// letters is [List] and [Replay] (used by `bub dlq`).
package dlq
