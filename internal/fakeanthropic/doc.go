// Package fakeanthropic is a fake Anthropic Messages API for tests: the
// official anthropic-sdk-go client (package llm/anthropic) talks to it over
// HTTP exactly as it talks to api.anthropic.com.
//
// Route: POST /v1/messages. With "stream": true it answers with the
// server-sent events Anthropic sends — message_start (with the input and
// cache usage), ping, then per content block content_block_start,
// content_block_delta (thinking_delta and signature_delta, text_delta,
// input_json_delta) and content_block_stop, then message_delta (stop_reason
// and output_tokens) and message_stop; a scripted mid-stream failure is an
// "error" event instead of the end. Without it, one message object.
// Failures are Anthropic's error body {"type": "error", "error": {"type",
// "message"}, "request_id"} with the status of the error type (400
// invalid_request_error, 401 authentication_error, 403 permission_error,
// 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 500
// api_error, 529 overloaded_error).
//
// The server checks what the real API rejects, so a test cannot pass on a
// request Anthropic would refuse: model, max_tokens and messages are
// required; roles are user and assistant only; text blocks must not be
// empty; every tool_use of an assistant message must be answered by a
// tool_result in the next message, and every tool_result must answer a
// tool_use of the message before it. A violation is a 400
// invalid_request_error.
//
// Start with [Start] in tests (a random 127.0.0.1 port, closed when the
// test ends). [Server.Requests] returns every request received (headers,
// raw body and decoded fields), so a test can assert the system field,
// cache_control placement and the tool format.
//
// # Answers
//
// Each request takes the next [Step] of the [Script]; when the steps have
// run out the server echoes the text of the last user message. A step
// answers with Error, or with Thinking, Text and ToolCalls as content
// blocks in that order, each split into Chunks deltas, followed by
// StreamError when it is set.
//
// Looking for the OpenAI-compatible fake? See internal/fakellm.
package fakeanthropic
