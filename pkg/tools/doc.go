// Package tools defines Bub's tools and the tool-call payloads that
// before_tool_call / after_tool_call hooks see ([Call], [Decision],
// [Result]).
//
// Start with [Tool] and [Registry]. Looking for bash, fs.*, tape.* and the
// other builtin tools? See package tools/toolkit. For how tool calls are
// executed inside the agent loop see package agent.
package tools
