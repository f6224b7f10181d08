// Package pipeline is Bub's turn pipeline (process_inbound): one inbound
// envelope through resolve_session, load_state, build_prompt, the model
// stage (run_model_stream, with save_state in its finally), render_outbound
// and dispatch_outbound, with on_error on failure.
//
// Start with [Pipeline.ProcessInbound] (turn.go is the whole pipeline) and
// its input, [Turn]: the inbound message with its delivery, and the
// session when the caller resolved it already.
// Looking for the hook rules it relies on? See package hooks. For the
// builtin implementation of every stage see package builtin; for the agent
// loop inside the model stage see package agent.
package pipeline
