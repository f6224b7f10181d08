// Package hookstest is the conformance suite for plugin wrappers: anything
// that stands between the registry and a plugin (chiefly the remote
// interceptor that serves a plugin over NATS) must keep the agent-loop hook
// semantics of seed 000.
//
// Start with [Run]. It builds its own plugins, hands each to the caller's
// wrap function, registers the results — all as given, all wrapped, and
// wrapped and unwrapped interleaved — and checks before_llm_call,
// after_llm_call, before_tool_call and after_tool_call: modify, chain,
// finish, proceed with arguments, deny, replace, no opinion, failures and
// panics skipped, shared tool results, errors that keep their kind, the
// hooks a wrapper exposes, and the decision records.
//
// Looking for the dispatch rules themselves? See package hooks
// (dispatch.go) and its tests.
package hookstest
