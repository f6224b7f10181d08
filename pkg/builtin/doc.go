// Package builtin is Bub's builtin plugin: the lowest-priority
// implementation of every turn stage (resolve_session, load_state,
// build_prompt, run_model_stream, save_state, render_outbound,
// dispatch_outbound, system_prompt, on_error, continue_prompt), the
// unknown-tool recovery of before_tool_call and the model and API questions
// of onboard_config (`bub onboard`, see [Plugin.OnboardConfig]).
//
// Start with [New] and [Options]: the plugin does no I/O of its own; the
// worker injects how to run the agent ([Runner]), where outbound envelopes
// go ([Outbox]) and how to read a session's model switches ([SwitchReader]).
// The startup hooks need none of them: [StartupRegistry] is the registry of
// the builtin and a build's plugins for processes that run no turns.
// Looking for the pipeline that calls these hooks? See package pipeline.
package builtin
