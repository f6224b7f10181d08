// Package ingress accepts envelopes from clients and publishes them as
// CloudEvents to the inbound stream, deduplicated by envelope id; it also
// delivers replies (waiting for a turn's outbound envelopes).
//
// Start with [Gateway] (publish + wait, used by the HTTP server and the bub
// CLI alike) and [Server], the HTTP API:
//
//   - POST /v1/messages publishes an envelope (server.go);
//   - GET /v1/sessions/{session}/events taps a session as server-sent
//     events (sse.go);
//   - the read API (read.go): GET /v1/sessions, GET
//     /v1/sessions/{session}/tape?offset=&limit=&q= (a page of a tape, read
//     from the JetStream tape store), GET /v1/status (internal/status, the
//     same figures as `bub status`) and GET /v1/hooks (a worker's hook
//     report, asked over NATS);
//   - GET /ui/ the web console (ui.go, files in ui/), which shows all of
//     the above in a browser;
//   - GET /healthz and GET /readyz.
//
// With a token configured every /v1/ endpoint needs "Authorization:
// Bearer <token>"; the console's static files hold no data and are served
// without it (the page asks for the token and sends it on every request,
// reading the SSE stream with fetch so that it can).
//
// Looking for how the worker consumes what ingress publishes? See
// internal/worker.
//
// A POST whose envelope id the inbound stream already took (its
// duplicate window, 2m by default) is a retry: nothing new is published,
// and [Gateway.Answer] returns the original reply. When the turn finished,
// the worker's done marker in the turn registry (bub_turns, key
// done.<id>, package replies) names the stream sequences of the outbound
// envelopes it sent, and the retry gets 200 with exactly those, as a
// first ?wait POST did (a failed turn's error envelope is its reply; a
// turn stopped by ,quit has none). Until the marker exists (the turn
// runs, or waits to run) a retry with ?wait watches for it up to its wait
// and then answers 202 pending, like a first POST; without ?wait it gets
// 202 at once. Nothing of this is kept in the ingress, so any instance
// answers, and a restarted one too. A message that never gets a reply of
// its own (steered into a running turn, or dead-lettered) leaves a retry
// waiting as it left the first POST. A stored reply gone before its
// marker (outbound retention shorter than the marker's hour) is 410
// reply_gone; a NATS failure while reading them is 503
// answer_unavailable.
//
// [Publisher.Publish] (gateway.go) answers only once the inbound stream
// stored the envelope. It retries the transient errors of a cluster
// without a stream leader
// ([github.com/bubbus/bub/pkg/jsretry.Transient]: no responders, no
// response from the stream, 503s, timeouts; each attempt bounded to 2s)
// with the same Nats-Msg-Id, so the stream keeps the envelope once, until
// its context's deadline ([PublishBudget] without one) and then fails
// with [ErrUnavailable]. The HTTP server gives the publish the
// request's ?wait (the replies get what it leaves) and turns
// ErrUnavailable into 503 jetstream_unavailable with Retry-After
// ([RetryAfterSeconds]); an envelope larger than the server's
// max_payload is 413 payload_too_large; any other publish error is 503
// publish_failed.
// A 503 is never an acceptance, but the envelope may have been stored
// (an acknowledgement lost): a client posts the same id again.
package ingress
