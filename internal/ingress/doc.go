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
package ingress
