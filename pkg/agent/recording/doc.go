// Package recording indexes the recorded events of one agent run — the
// lifecycle events a worker published to JetStream, each with its seq —
// by step and tool call, so that a run can be answered from what an
// earlier attempt of it recorded: the model's answer to each completed
// call (llm_call.finished carries the text and the tool calls), each
// tool call's decision and result (tool_call.started, tool_call.finished),
// the messages appended before each call (messages.pending) and each
// step's continue prompt (step.finished).
//
// Build a [Run] with [New] from decoded events (events.DecodePayload of
// each CloudEvent, with its seq). The agent loop consumes it as
// agent.Run.Resume: a worker resuming a turn whose worker died
// (internal/worker, resume.go) fetches the interrupted run's events from
// the events stream and continues it; a replay of a recorded session
// answers the model's calls the same way. What the loop does with each
// recorded event is written in docs/durable.md.
package recording
