// Package worker consumes inbound envelopes from the shared durable pull
// consumer and runs one turn per envelope, keeping the message alive with
// in-progress acks, acknowledging it only after the turn's events and
// outbound envelopes are durably published, dead-lettering what it cannot
// decode, and draining on shutdown.
//
// Start with [Worker.Run]. The turn itself is a [Processor]; the hook-driven
// pipeline that implements it is package framework. Looking for what
// publishes inbound envelopes? See internal/ingress.
package worker
