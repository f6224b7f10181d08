// Package events holds Bub's agent events on both sides of the process
// boundary: the in-process EventBus with Bub's semantics, the
// lifecycle event types, their CloudEvents payloads and codec, and the
// bridge that publishes them to JetStream.
//
// In the process, events are synchronous and may decide: each agent run
// has a [Bus]; [On] registers a handler for an event type or interface,
// [Emit] runs the matching handlers in registration order and returns the
// event as they changed it (a new [tools.Call] or [llm.Request], a
// decision, a next prompt, appended messages). The rules are stated once,
// on [Emit]. Custom events embed [Meta] (or [TapeMeta] for a [TapeEvent]).
//
// On NATS, events only inform: a [Bridge] attached to a bus publishes
// every event, after its handlers, as a CloudEvent (types in types.go,
// payloads and content policy in payloads.go, JSON Schemas and examples in
// docs/events/). Consumers decode with [FromMsg] or [Decode] (either
// content mode) and [DecodePayload]. Nothing on NATS can change control
// flow; that is what hooks over request/reply are for.
//
// Entry points: [Bus], [On], [Emit] and [Bus.OnEmitted]; the events in
// lifecycle.go and framework.go; [Codec] ([ToCloudEvent], [DecodePayload])
// and [Registry] for custom event types; [NewBridge], [Bridge.Attach] and
// [Attachment.Flush]; [New], [Encode], [Decode] and [ToMsg] for CloudEvents
// in general.
//
// Looking for hook dispatch (before_tool_call and friends)? See package
// hooks; the adapter that maps plugin hooks onto these events belongs
// with it. For the agent loop that emits them see package agent; for the
// tape entries the recorder builds from them see package tape; for subject
// and stream names see package subjects.
package events
