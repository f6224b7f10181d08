// Package agent is Bub's agent loop: a run of steps, each one model call
// followed by the tool calls the model asked for, with every lifecycle
// event emitted on the run's in-process events.Bus (docs/events/README.md,
// "Inside a worker: the run's event bus").
//
// Start with [Agent.Run] (loop.go is the loop; step.go one step; tools.go
// the tool executor; command.go comma commands). A step's system prompt
// is the hooks' fragment, the tools block and the skills block of
// [Settings.Skills] (see package skills), joined by blank lines. The loop
// knows no hooks:
// hooks reach it through the AgentPlugins adapter ([Plugins]), which
// registers handlers on the bus in hook priority order. Looking for the
// turn around a run (resolve_session … dispatch_outbound)? See package
// pipeline. For the model side see package llm; for tools see package
// tools.
//
// # Guarantees
//
// The tests of this package pin them:
//
//   - Events: a run emits RunStarted, then per step StepStarted,
//     MessagesPending, LLMCallStarted, LLMCallFinished, the tool events,
//     ChatFinished, MessagesPending at step end (no tool calls only) and
//     StepFinished, then RunFinished. Once RunStarted was emitted
//     RunFinished is too, and every StepStarted gets its StepFinished,
//     except on cancellation. A handler's error fails the run.
//   - Exactly once: LLMCallFinished for every provider call that completed
//     or failed, ToolCallFinished for every tool call that succeeded,
//     failed, was denied or replaced; neither when ctx was cancelled, and
//     no LLMCallFinished for a call a finish decision skipped.
//   - Tools: the calls of one response run concurrently, results keep call
//     order, every failure (unknown or not-allowed tool, malformed or
//     invalid arguments, handler error or panic, deny) reaches the model
//     as {kind, message, details?} and never fails the run.
//   - A context-length error hands off once per run and retries the
//     original prompt; MaxSteps bounds the steps ([ErrMaxSteps]).
//   - Comma commands run one tool between the tool events and end with
//     CommandFinished; every failure, a deny included, is the run's error.
package agent
