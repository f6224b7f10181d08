// Package telegram is Bub's Telegram channel: a bot that
// long-polls the Bot API over plain net/http and encoding/json, hands the
// messages it accepts to the channel's [hooks.MessageHandler], and
// delivers replies with sendMessage.
//
// Construct it with [New] from a [Config] ([ConfigFromEnv] reads the
// BUB_TELEGRAM_* variables); it is enabled iff a token is set, asks for
// debounced input, and is named "telegram".
//
// # Inbound
//
// Start calls getMe (the bot's id and username decide mentions) and
// deleteWebhook with drop_pending_updates, so updates sent while the bot
// was offline are dropped as Bub's polling drops them; then getUpdates
// long-polls for "message" updates only, each update handled once and in
// order (the offset always moves past the last update seen, a malformed
// update is logged and skipped).
//
//   - "/start" answers "Bub is online. Send text to start.", or the
//     no-access message in a chat outside allow_chats.
//   - "/bub <args>" is handled like a message whose text is <args>; other
//     commands, and commands addressed to another bot, are ignored.
//   - A message from a chat outside allow_chats is dropped silently; with
//     allow_users set, a sender whose id and username are both unlisted
//     gets "Access denied.".
//
// An accepted message becomes an envelope of session "telegram:<chat_id>",
// channel "telegram", chat_id the chat id and id
// "telegram:<chat_id>:<message_id>". Content starting with "," is a comma
// command: trimmed, kind "command", no media. Any other content is Bub's
// JSON object {message, message_id, type, username, full_name, sender_id,
// sender_is_bot, date, links, media, reply_to_message} (absent values left
// out, non-ASCII kept), where message is the text or a label such as
// "[Photo message] Caption: …" or "[Voice message: 3s]". is_active is
// Bub's filter: private chats are active; in groups a message must
// mention the bot (@username, a mention entity, or "bub" anywhere in the
// text) or reply to it. Files up to [MaxDownload] (the message's and the
// replied message's) are downloaded with getFile and inlined into the
// envelope's media as data URLs; larger files and failed downloads are
// left out of the media, their metadata stays in the content.
//
// While an active message's turn runs the chat shows "typing", refreshed
// every 4 s, one loop per chat. The turn runs in another process, so the
// loop stops when Send delivers the last reply of a batch for the chat, or
// after two minutes (a reply delivered by another gateway instance, or no
// reply at all).
//
// Telegram lets one client poll a bot at a time: run the channel in one
// gateway instance. A second instance polling the same bot gets 409
// Conflict answers and retries with backoff; an update both instances
// receive yields envelopes with the same id, so the inbound stream's
// deduplication by envelope id can drop the second.
//
// # Outbound
//
// [Channel.Send] sends the "message" member of a JSON object content, or
// the content as it is; blank text is skipped. Text longer than
// [MaxMessageLength] goes as several messages, split at a newline or
// space where possible; it reports each one delivered to its ctx's
// channels.Progress and, sent again, skips those (the gateway keeps them
// with its delivery claim). A 429 answer is waited out (retry_after, at
// most a minute, three attempts in all). Errors are returned, wrapped,
// with the Bot API's answer as an [*APIError], whose Wait is a longer
// retry_after (channels.RetryAfter); a 400 or 403 answer (chat not found,
// bot blocked by the user) is channels.ErrUndeliverable, which the
// gateway dead-letters at once rather than retrying.
//
// # Deviation from Bub
//
// Bub sets output_channel "null" on non-command messages: the model's
// plain output is dropped and replies go through a "telegram" skill script
// the model runs. This runtime has no such skill, and users expect an
// answer, so every envelope's output_channel is "telegram" and the model's
// reply comes back through Send. For the same reason Send sends a JSON
// object without a string "message" as it is, where Bub would drop it.
//
// Looking for a fake Bot API server for tests? See package
// channels/telegram/telegramtest. For the channel contract see package
// channels.
package telegram
