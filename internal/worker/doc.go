// Package worker consumes inbound envelopes from the shared durable pull
// consumer and runs one turn per envelope, keeping the message alive with
// in-progress acks, acknowledging it only after the turn's events and
// outbound envelopes are durably published, dead-lettering what it cannot
// decode, and draining on shutdown.
//
// Start with [Worker.Run]. The turn itself is a [Processor]; the hook-driven
// pipeline that implements it is package pipeline. Looking for what
// publishes inbound envelopes? See internal/ingress.
//
// [NewRuntime] starts the MCP servers of [RuntimeOptions.MCP] and adds
// their tools to the agent's (package tools/mcptools); [Runtime.Close],
// which runs once the worker drained, stops them.
//
// With [RuntimeOptions.Instance] set, the background shells of every
// worker are reachable from all: the state bucket maps a shell id to its
// worker (key shell.<id>, deleted when the shell is gone) and the owner
// answers bash.output and bash.kill on bub.worker.<instance>.shell. A
// worker that died leaves its keys behind; a call for one of its shells
// then gets "shell <id> belongs to worker <instance>, which is not
// running".
package worker
