// Package openai is the OpenAI-compatible model provider: streaming chat
// completions through the official github.com/openai/openai-go SDK. It
// covers OpenAI, OpenRouter, vLLM, llama.cpp, Ollama and any server that
// speaks POST /chat/completions with server-sent events.
//
// Start with [New] (one endpoint) or [Factory] (what llm.Router uses to
// build a provider per name from the config). [Provider.Complete] documents
// the request body it sends (Bub's precedence of completion args, managed
// keys and reasoning_effort) and how the stream is merged (text, reasoning,
// tool-call deltas by index, usage).
//
// Looking for the provider:model routing and fallback models? See
// llm.Router. For the key-less stand-in model see package llm/echo; for a
// fake OpenAI-compatible server to test against see internal/fakellm.
package openai
