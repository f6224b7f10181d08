// Package fakellm is a fake OpenAI-compatible API for tests and
// benchmarks: the real openai-go client (package llm/openai) talks to it
// over HTTP exactly as it talks to OpenAI, vLLM or Ollama.
//
// Routes: POST /v1/chat/completions (stream=true answers with server-sent
// events "data: {chunk}" ending in "data: [DONE]", with a final usage
// chunk when stream_options.include_usage is true; stream=false answers
// with one chat.completion object) and GET /v1/models.
//
// Start with [Start] in tests (a random 127.0.0.1 port, closed when the
// test ends) or [New], an [http.Handler] for a real listener (the
// `bub fake-llm --addr ADDR --script FILE` command). [Server.Requests] and
// [Server.WaitRequests] return every chat request received (raw body,
// decoded fields and messages), so a test can assert what the model saw;
// [Server.InFlight] counts the requests being answered right now;
// [Server.Enqueue] adds steps while the server runs.
//
// # Answers
//
// Each chat request takes the first pending step whose "match" is empty or
// a substring of the request's last user message; the step is consumed
// unless "repeat" is true. When no step matches — in particular when the
// script has run out or is empty — the server echoes: it answers with the
// last user message's text. So an empty script is a working echo model for
// benchmarks.
//
// # Script file format
//
// A script is one JSON object; unknown fields are errors ([LoadScript]).
// Durations are Go duration strings. This is testdata/example.json, which
// a test loads and plays through:
//
//	{
//	  "api_key": "sk-test",
//	  "models": ["fake", "fake-large"],
//	  "steps": [
//	    {"text": "Hello there", "chunks": 3},
//	    {"reasoning": "Let me think.", "text": "42",
//	     "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15, "cached_tokens": 8}},
//	    {"match": "weather", "tool_calls": [
//	      {"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}},
//	      {"name": "broken", "arguments": "{\"not json"}
//	    ]},
//	    {"error": {"status": 400, "message": "This model's maximum context length is 8192 tokens",
//	               "type": "invalid_request_error", "code": "context_length_exceeded"}},
//	    {"echo": true, "delay": "20ms", "chunk_delay": "1ms"},
//	    {"text": "partial", "stream_error": "upstream disconnected"},
//	    {"raw_chunks": [{"choices": [{"index": 0, "delta": {"content": "verbatim"}}]}]},
//	    {"match": "ping", "repeat": true, "text": "pong"}
//	  ]
//	}
//
// Script fields: api_key (optional) requires "Authorization: Bearer
// <api_key>" on every request, else 401; models (optional, default
// ["fake"]) is what GET /v1/models lists — chat requests may name any
// model; steps as below.
//
// Step fields:
//   - match, repeat: selection, as above.
//   - text, or echo: the answer text; reasoning: streamed first as
//     "reasoning_content" deltas; tool_calls: requested in order with
//     indices 0, 1, ... (id defaults to "call_<n>"; arguments is a JSON
//     object, or a JSON string sent verbatim, default {}).
//   - chunks: how many deltas the reasoning, the text and each tool call's
//     arguments are split into (default 3). Each tool call is streamed as a
//     header delta (index, id, type, name, empty arguments) and then its
//     argument pieces.
//   - usage: replaces the computed usage (rough word counts of the
//     messages and the answer).
//   - error: an HTTP error with the OpenAI error body; excludes content.
//   - stream_error: after the content, an SSE event {"error": {...}}
//     instead of [DONE] (a failure in the middle of a stream).
//   - raw_chunks: chunk objects streamed verbatim, then [DONE]; streaming
//     requests only. For out-of-order tool-call indices, odd reasoning
//     fields and other shapes the content fields cannot express.
//   - delay: waited before the first byte; chunk_delay: between chunks.
//     Both end early when the client goes away.
package fakellm
