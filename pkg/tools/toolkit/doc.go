// Package toolkit provides Bub's builtin tools: bash, bash.output and
// bash.kill (shell processes), fs.read, fs.write and fs.edit (confined to
// the workspace), web.fetch, tape.info, tape.search, tape.reset,
// tape.handoff and tape.anchors, skill (a skill's body, or the list of
// skills, from the [skills.Catalog] of [Options]; the turn state's
// allowed_skills limits both), subagent, and the command-only help,
// model, reasoning_effort and quit.
//
// Every tool declares its effect class ([tools.Effect]): read_only
// (fs.read, web.fetch, tape.info, tape.search, tape.anchors, skill,
// bash.output, help), idempotent (fs.write, bash.kill, model,
// reasoning_effort, quit) or irreversible (bash, fs.edit, subagent,
// tape.reset, tape.handoff).
//
// Start with [Register], which adds them to a [tools.Registry] given
// [Options]; the worker owns the [Shells] manager it passes there and
// closes it on shutdown. Tools are plain [tools.Tool] values: run them
// with [tools.Invoke] for Bub's argument validation and error
// normalization.
//
// File tools resolve relative paths against the workspace of the
// [tools.Context] and refuse any path that leaves it — "..", absolute
// paths elsewhere, or symbolic links resolving elsewhere — with an
// invalid_input error naming the path; files are then opened through an
// [os.Root] so a link swapped in meanwhile cannot escape either. bash is
// not confined: it starts in the workspace but runs whatever it is given.
//
// Background shells run on the worker that started them. In a cluster
// the worker gives its [Shells] a [ShellRouter] ([WithRouter]): it claims
// each background shell id ("bash-<8 hex>", Bub's format), and
// bash.output or bash.kill of an id it does not hold runs on the owner
// ([Shells.Local] answers there); an owner that is gone is an error
// naming it.
//
// The package is Unix-only (process groups and signals).
//
// Looking for the tool model, the registry or comma-command parsing? See
// package tools. For where tool calls run inside a turn see package agent;
// for skill discovery see package skills. Each tool group lives in a file
// of its own and is one entry in the list of groups Register walks
// (spill.read is not built yet).
package toolkit
