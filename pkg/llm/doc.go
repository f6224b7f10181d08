// Package llm is the model side of Bub: chat messages, the request and
// result that before_llm_call / after_llm_call hooks see ([Request],
// [Result], [Decision]), and the [Provider] interface model back-ends
// implement.
//
// Start with [Provider] and [Router] (which picks a provider from a
// "provider:model" string). Looking for the OpenAI-compatible client? See
// package llm/openai. For the built-in key-less model see package llm/echo.
package llm
