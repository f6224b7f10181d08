// Package providers wires the standard model providers into an
// llm.Router: "echo" is the built-in stand-in model (package llm/echo),
// "anthropic" is the native Anthropic Messages API provider (package
// llm/anthropic) and every other provider name (openai, openrouter,
// ollama, vllm, llamacpp, custom, ...) is the OpenAI-compatible provider
// (package llm/openai), each with the base URL and key the config
// resolves for that name.
//
// It is its own package because llm/echo, llm/anthropic and llm/openai
// import llm, so llm cannot import them. Start with [NewRouter]. Looking for the routing and
// fallback rules? See llm.Router; for the settings see llm.Config.
package providers
