// Package telegramtest is a fake Telegram Bot API server for tests: an
// httptest server that speaks the real API's wire format (paths
// /bot<token>/<method>, the {ok, result} and {ok:false, error_code,
// description, parameters} envelopes, JSON, form or query parameters) for
// the methods a bot channel uses: getMe, deleteWebhook, getUpdates (long
// polling that honours offset, limit, timeout and allowed_updates),
// sendMessage, sendChatAction and getFile with file downloads under
// /file/bot<token>/<path>.
//
// A test injects what users write with [Server.SendUserMessage] (or
// [Server.PushUpdate] for arbitrary updates), and observes what the bot
// did with [Server.Sent], [Server.Actions], [Server.Calls] and the
// waiting variants, which block on changes rather than polling. Failures
// are injected with [Server.FailNext] (for example a 429 with
// retry_after).
//
// Start with [NewServer]. A test that runs a bub binary can start the
// fake in its own process ([NewServer]) and point the binary at it with
// BUB_TELEGRAM_API_BASE; [Listen] binds a chosen address and
// [Server.ServeControl] lets another process inject messages and read
// replies over HTTP. Looking for the channel that talks to it? See
// package channels/telegram.
package telegramtest
