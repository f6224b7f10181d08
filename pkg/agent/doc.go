// Package agent is Bub's agent loop: a run of steps, each one model call
// followed by the tool calls the model asked for, with every lifecycle
// event of seed 002 emitted on the run's in-process events.Bus.
//
// Start with [Agent.Run] (loop.go is the loop; step.go one step; tools.go
// the tool executor; command.go comma commands). The loop knows no hooks:
// hooks reach it through the AgentPlugins adapter ([Plugins]), which
// registers handlers on the bus in hook priority order. Looking for the
// turn around a run (resolve_session … dispatch_outbound)? See package
// framework. For the model side see package llm; for tools see package
// tools.
package agent
