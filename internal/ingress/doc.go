// Package ingress accepts envelopes from clients and publishes them as
// CloudEvents to the inbound stream, deduplicated by envelope id; it also
// delivers replies (waiting for a turn's outbound envelopes).
//
// Start with [Gateway] (publish + wait, used by the HTTP server and the bub
// CLI alike) and [Server] (the HTTP API: POST /v1/messages, healthz,
// readyz). Looking for how the worker consumes what ingress publishes? See
// internal/worker.
package ingress
