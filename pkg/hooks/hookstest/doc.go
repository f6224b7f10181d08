// Package hookstest helps test plugins: it is the conformance suite for
// plugin wrappers, and a small kit for plugin authors. A wrapper is
// anything that stands between the registry and a plugin (chiefly the
// remote interceptor that serves a plugin over NATS); it must keep the
// agent-loop hook rules of docs/hooks.md.
//
// Start with [Run]. It builds its own plugins, hands each to the caller's
// wrap function, registers the results — all as given, all wrapped, and
// wrapped and unwrapped interleaved — and checks before_llm_call,
// after_llm_call, before_tool_call and after_tool_call: modify, chain,
// finish, proceed with arguments, deny, replace, no opinion, failures and
// panics skipped, shared tool results, errors that keep their kind, the
// hooks a wrapper exposes, and the decision records.
//
// Testing your own plugin? [Registry] registers and starts it (with any
// others) so a test calls its hooks through the real dispatch rules, and
// [CLIApp] runs the commands its register_cli_commands adds. See
// docs/plugins.md and examples/plugins/opsbot.
//
// Measuring dispatch? [BenchRegistry] and the Benchmark* functions are
// the benchmarks of three in-process plugins that package hooks's `go test
// -bench` and `bub bench` (figure P1) both run.
//
// Looking for the dispatch rules themselves? See package hooks
// (dispatch.go) and its tests.
package hookstest
