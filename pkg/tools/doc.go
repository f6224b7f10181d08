// Package tools defines Bub's tools and the tool-call payloads that
// before_tool_call / after_tool_call hooks see ([Call], [Decision],
// [Result]).
//
// Every tool has an effect class ([Effect]: read_only, idempotent or
// irreversible) saying whether a call that started but never finished may
// safely run again; a tool that declares none is irreversible, the safe
// assumption about a tool nobody described.
//
// Start with [Tool] and [Registry]. Looking for bash, fs.*, tape.* and the
// other builtin tools? See package tools/toolkit. For the tools of MCP
// servers see package tools/mcptools. For how tool calls are executed
// inside the agent loop see package agent.
package tools
