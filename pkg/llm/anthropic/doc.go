// Package anthropic is the native Anthropic model provider: the Messages
// API (POST /v1/messages with server-sent events) through the official
// github.com/anthropics/anthropic-sdk-go SDK. llm/providers selects it for
// "anthropic:<model>"; every other provider name stays on the
// OpenAI-compatible client (package llm/openai).
//
// Start with [New] (one endpoint) or [Factory] (what llm.Router uses).
// [Provider.Complete] documents how Bub's OpenAI-shaped messages become
// Anthropic's (the system prompt as the top-level system field, assistant
// tool_calls as tool_use blocks, tool messages as tool_result blocks of one
// user message), where cache_control goes, how reasoning_effort becomes an
// extended-thinking budget, how usage (with cache reads and writes) is
// reported and which errors come back.
//
// Looking for a fake Messages API to test against? See
// internal/fakeanthropic. For the provider:model routing see llm.Router.
package anthropic
