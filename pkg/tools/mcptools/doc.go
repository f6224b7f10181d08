// Package mcptools connects to MCP (Model Context Protocol) servers with
// the official SDK (github.com/modelcontextprotocol/go-sdk) and offers
// their tools as ordinary [tools.Tool] values named mcp.<server>_<tool>
// (the model sees mcp_<server>_<tool>) with the server's input schema. Once
// in a worker's tool registry they go through before_tool_call,
// after_tool_call, comma commands (`,mcp.files_read path=a.txt`), the tape
// and the events exactly like the builtin tools.
//
// Start with [ServersFromEnv] (the servers of BUB_MCP_SERVERS, which the
// config file's `mcp.servers` stands for), [New], [Manager.Start],
// [Manager.Register] and [Manager.Close]. A [Server] is a stdio command
// (command, args, env) or a streamable-HTTP URL (url, headers).
//
// Effect classes come from the MCP tool annotations: readOnlyHint is
// read_only, else idempotentHint is idempotent, else the tool is
// irreversible (see [Effect] and [tools.Effect]).
//
// Lifecycle: [Manager.Start] starts a supervisor per server and waits for
// each server's first connection attempt (bounded by
// [Options.ConnectTimeout]). A session that ends — the stdio process died,
// the HTTP server went away, a call found the connection broken — is
// reopened with jittered exponential backoff (250ms doubling up to 30s),
// restarting a stdio server's process. Meanwhile a call of the server's
// tools is a temporary tool error "MCP server '<name>' is unavailable
// (<reason>); …". The tool set is the one the servers listed at start: a
// worker's registry is frozen once it serves, so a server that was down
// then offers its tools from the worker's next start on. [Manager.Close]
// closes every session (a stdio server gets its stdin closed, then
// SIGTERM, then SIGKILL; an HTTP session is deleted).
//
// Secrets: env and header values (and a URL's password) never appear in
// any text of this package — errors, logs, [Manager.Status], the
// fmt and slog forms of a [Server]: they are replaced by "[redacted]". A
// stdio server inherits only PATH, HOME, USER, LOGNAME, SHELL, TERM,
// TMPDIR, TZ, LANG and LC_ALL from the worker, so the worker's model keys
// never reach it.
//
// Looking for the tool model and registry? See package tools. For where
// a worker starts its MCP servers see internal/worker; `bub mcp list`
// lives in internal/bubcmd.
package mcptools
