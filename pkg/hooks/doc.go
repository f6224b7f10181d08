// Package hooks is Bub's plugin system: plugins, the hooks they implement,
// the [Registry] that orders them and the dispatch rules of every hook
// (docs/hooks.md is the reference).
//
// Start with [Registry] ([New], [Registry.Register], [Registry.Start]) and
// the hook interfaces in hookspecs.go. A plugin is any Go value with a
// Name; every hook is a one-method interface it may implement
// ([SessionResolver], [LLMCallInterceptor], …). Hook inputs are structs,
// so adding a field never breaks a plugin. [Specs] lists every hook with
// its kind, phase and order; [Registry.Report] is what `bub hooks` prints.
//
// # Dispatch rules
//
// Every rule lives in dispatch.go; this list is its summary.
//
//   - Priority: the most recently registered plugin runs first (LIFO). The
//     caller registers the builtin plugin first, so it has the lowest
//     priority. Local and remote plugins interleave by the same rule: a
//     remote interceptor is just another registered plugin.
//   - firstresult (call_first): implementations run in priority order until
//     one answers (ok=true). An answer stops the chain even when it is empty;
//     "no opinion" (ok=false) moves on. The fallback when nobody answers, or
//     when the selected answer is empty, is Bub's: resolve_session →
//     the message's session id or "<channel>:<chat_id>"; build_prompt → the
//     message content, without trying lower plugins; admit_message →
//     process; continue_prompt → [ErrNoAnswer].
//   - broadcast (call_many): every implementation runs in priority order.
//     load_state results are merged in reverse (higher priority wins);
//     render_outbound batches are concatenated, an empty total becomes one
//     echo envelope; system_prompt fragments are reversed and the non-empty
//     ones joined with "\n\n"; provide_runtime_options appends models in
//     priority order; provide_channels deduplicates by channel name, the
//     first in priority order winning; onboard_config runs in registration
//     order, each implementation seeing the config merged so far.
//   - Errors: ordinary hooks propagate the first error (wrapped in
//     [*HookError]) and stop. Only on_error and the four agent-loop hooks
//     isolate failures: the failure is logged (hook.on_error_failed,
//     hook.agent_hook_failed) and the next implementation runs. A panic in
//     any plugin is recovered into a [*PanicError] and then follows its
//     hook's rule.
//   - Agent-loop hooks: before_llm_call and before_tool_call are chained —
//     each implementation sees the request or call as modified so far;
//     finish, replace and deny stop the chain; a proceed with arguments
//     replaces the arguments with a copy and the chain continues. Vetoes
//     happen only through decisions, so a crashing policy plugin cannot veto
//     (except by returning [ErrAbort] on purpose, for fail-closed policies:
//     the call then fails with a *bub.Error "<hook>: <why>", the plugin's
//     own *bub.Error message and kind when it gave one, and the abort is
//     a [VerdictAbort] decision).
//     after_llm_call and after_tool_call run every implementation once in
//     priority order; after_tool_call implementations share one result
//     object, so an implementation may replace the result. Calling the
//     after hooks exactly once per completed call, never on cancellation,
//     is the agent loop's job. Every decision that changed or stopped a call
//     is reported to the observer installed with [WithDecisionObserver].
//   - Model hooks: the highest-priority plugin that implements run_model or
//     run_model_stream picks the path; a request for the other shape is
//     adapted (one text delta, or the concatenated text deltas).
//
// # Phases (Bub's "sync-only" hooks)
//
// Python Bub calls some hooks synchronously because they run outside the
// event loop; Go has no such split, so Bub's sync-only hooks map to
// phases instead:
//
//   - startup ([Registry.Startup]): register_cli_commands, onboard_config,
//     provide_channels, build_tape_context — called while a service or
//     command starts, never per turn.
//   - scope ([Registry.OpenScope]): provide_tape_store and
//     provide_steering_inbox, resolved once per runtime scope and closed
//     when it ends.
//   - turn: everything else, including system_prompt, which Bub lists
//     as sync-only but Bub calls on every agent step with the step's prompt
//     and state.
//
// Looking for remote interceptors (plugins served over NATS)? They
// implement the same interfaces; [Describer] marks them in reports and
// [HookSelector] limits them to the hooks their service serves. The
// conformance suite every plugin wrapper must pass is package hookstest.
// For the turn pipeline that calls these hooks see package pipeline;
// for the agent loop see package agent.
package hooks
