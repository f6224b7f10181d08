// Package opsbot is an example Bub plugin, the kind an operations team
// ships in its own build of Bub. It uses five hooks:
//
//   - system_prompt: the team's house rules join the system prompt;
//   - before_tool_call: shell commands matching a deny list are denied
//     before they run (a decision, so the model sees why);
//   - after_tool_call: every tool call is appended to a JSONL audit file;
//   - provide_channels: a "webhook" channel — messages arrive as HTTP
//     POSTs, replies leave as POSTs to a callback URL;
//   - register_cli_commands: `bub opsbot-check COMMAND` says whether the
//     policy would let a shell command run.
//
// Build a Bub with it (see docs/plugins.md):
//
//	func main() { app.Main(opsbot.New(opsbot.FromEnv(os.Getenv))) }
//
// Settings (environment): OPSBOT_DENY (comma list of substrings denied in
// bash commands; default "rm -rf,mkfs,shutdown"), OPSBOT_AUDIT_FILE
// (audit log path; empty = no audit), OPSBOT_WEBHOOK_ADDR (the channel's
// listen address; empty = the channel is disabled) and
// OPSBOT_WEBHOOK_CALLBACK (where replies are POSTed).
package opsbot
