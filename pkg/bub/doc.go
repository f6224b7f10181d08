// Package bub holds the small vocabulary every other package shares: the
// typed [Error] with its [Kind] (Bub's BubError) and the per-turn [State].
//
// Start with [State] (the mutable turn state shared by every hook stage, tool
// and event of one turn) and [Error] (how tools, providers and tapes report
// failures that must keep a kind and details).
//
// Looking for the message that enters a turn? See package envelope. For hook
// dispatch see package hooks; for the agent loop see package agent.
package bub
