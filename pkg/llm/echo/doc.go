// Package echo is Bub's built-in stand-in model: a deterministic provider
// that needs no key and no network. It answers with the plain text of the
// last user message, unchanged, streamed as a few text deltas; it never
// calls a tool and never reasons. Its usage counts words, not tokens.
//
// It exists so the whole stack (ingress, workers, tapes, hooks) runs and
// can be tested with no model configured: it is the default model
// "echo:echo" (see llm.DefaultModel). It is not an AI; say so wherever it
// answers a user.
//
// Start with [New]. Looking for a real model? See package llm/openai. For a
// scriptable fake OpenAI server for tests see internal/fakellm.
package echo
