// Package subjects names everything Bub puts on NATS: subjects, streams,
// consumers, KV buckets and headers. No other package holds a NATS name
// literal; a test checks that.
//
// Start with [Names] (built by [New] from the configurable root prefix,
// "bub" by default) and [Token], the injective subject-safe encoding of
// session ids and channel names.
//
// Looking for how streams are created? See internal/natsx. For the
// CloudEvent types that travel on these subjects see package events.
package subjects
