// Package envelope defines the message that enters and leaves a turn: the
// inbound and outbound [Envelope] with its ordered [Context], media items
// and Bub's helper rules (context string, default session id, batching).
//
// Start with [Envelope]. Looking for its CloudEvents encoding? See package
// events (codec.go). For how ingress accepts envelopes over HTTP see
// internal/ingress.
package envelope
