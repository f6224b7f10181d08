// Package replies records where the outbound envelopes that answer an
// inbound envelope are stored, so a client that retries the inbound
// envelope gets the original answer back.
//
// During a turn the worker's outbox calls [Record] with the stream and
// sequence of every outbound envelope it published (the publish
// acknowledgement gives both; a deduplicated republish gives the original
// sequence). The admission gate, which started the turn under [Collect],
// writes [Recorded] into the envelope's done marker (turn-registry key
// done.<envelope>) as a [Done] when the turn finishes. Ingress reads the
// marker with [Decode] and fetches the replies from the stream, so the
// answer survives an ingress restart: it lives in JetStream only.
//
// Looking for the done marker's life cycle? See internal/admission. For
// the HTTP side of a retried POST /v1/messages see internal/ingress.
package replies
