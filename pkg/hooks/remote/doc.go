// Package remote is the client side of Bub's interceptor services: hooks
// served by another process over NATS request/reply, and the wire protocol
// they speak.
//
// Start with [Config] (or [ConfigsFromEnv] for BUB_INTERCEPTORS and the
// BUB_INTERCEPTOR_<SERVICE>_* variables) and [New]. The [Plugin] it returns
// is an ordinary [hooks.Plugin]: it implements every hook an interceptor
// can serve ([Hooks]) by sending the hook's input to
// bub.hook.<service>.<hook> and decoding the answer in the same decision
// vocabulary as in-process hooks, so the registry applies exactly the same
// rules to it (priority by registration order, chaining, isolation). Its
// [Plugin.Start] discovers through the NATS micro INFO endpoint which hooks
// the service serves and how many instances run; [hooks.HookSelector]
// keeps the registry from calling the others, and [hooks.Describer] shows
// the plugin as remote in `bub hooks`.
//
// # Failures
//
// Every call has a deadline: the configured timeout or the caller's
// deadline, whichever is earlier; it travels in the Bub-Deadline header so
// the interceptor stops at the same time. No responders, a timeout, a
// malformed reply and a remote error are each detected, counted by outcome
// ([Plugin.Stats]) and handled by the service's [Policy]:
//
//   - [FailOpen] (default, Bub's rule for a failing hook): the interceptor
//     is skipped. For the agent-loop hooks and on_error the plugin returns the error
//     and the registry logs and isolates it; for the other hooks the plugin
//     logs it and answers "no opinion" — except an error the interceptor
//     itself returned, which propagates like a local plugin's error.
//   - [FailClosed]: before_tool_call denies the call with a message naming
//     the service, before_llm_call aborts the call ([hooks.ErrAbort]),
//     every other hook returns the error.
//
// A call cancelled by its caller is neither: it returns the caller's error.
//
// # Protocol
//
// A request is JSON [Request] with the hook's input type from protocol.go
// and headers Bub-Deadline (RFC 3339) and, when known, traceparent and
// tracestate; a reply is JSON [Reply] ({} for no opinion) or a NATS micro
// error. docs/interceptors.md specifies it for implementers in any
// language.
//
// Looking for the server side (serving an in-process plugin as an
// interceptor service)? See package interceptor. For the registry's
// dispatch rules see package hooks; for the conformance suite both sides
// pass see package hookstest.
package remote
