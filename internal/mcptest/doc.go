// Package mcptest is a small MCP server, built with the same SDK as the
// client, for tests: over stdio (the test binary runs itself as the
// server, see [ServeIfChild]) and over streamable HTTP on 127.0.0.1
// ([StartHTTP]), both with the tools echo, pid, put, has_env, fail and
// odd (whose schema the tool registry refuses).
//
// Looking for the MCP client? See package pkg/tools/mcptools.
package mcptest
