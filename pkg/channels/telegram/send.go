package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
)

// MaxMessageLength is the longest text one sendMessage carries, in UTF-16
// code units as Telegram counts them; longer replies are split.
const MaxMessageLength = 4096

// Send delivers an outbound envelope to its chat: the "message" member
// when the content is a JSON object with a string "message", else the
// content as it is; blank text is skipped. Text over MaxMessageLength goes
// as several messages. The last reply of a turn's batch stops the chat's
// typing indicator.
func (c *Channel) Send(ctx context.Context, msg *envelope.Envelope) error {
	if msg.ChatID == "" {
		return errors.New("telegram send: envelope has no chat_id")
	}
	if msg.BatchSize == 0 || msg.BatchIndex >= msg.BatchSize-1 {
		defer c.stopTyping(msg.ChatID)
	}
	text := replyText(msg.Content)
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if err := c.sendText(ctx, msg.ChatID, text); err != nil {
		return fmt.Errorf("telegram send to chat %s: %w", msg.ChatID, err)
	}
	return nil
}

// replyText is Bub's send: the "message" of a JSON object, else the raw
// content. Unlike Bub, an object without a string "message" is sent as
// it is rather than dropped: model output now reaches Send, and a model
// may answer with a JSON object.
func replyText(content string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(content), &obj) != nil {
		return content
	}
	var text string
	if raw, ok := obj["message"]; ok && json.Unmarshal(raw, &text) == nil {
		return text
	}
	return content
}

// sendText sends text to chatID in chunks Telegram accepts, skipping
// blank chunks, each waiting out a 429 within bounds. It resumes after
// the chunks an earlier attempt delivered (channels.Progress).
func (c *Channel) sendText(ctx context.Context, chatID, text string) error {
	p := channels.ProgressFrom(ctx)
	part, done := 0, p.Sent()
	for _, chunk := range split(text, MaxMessageLength) {
		if strings.TrimSpace(chunk) == "" {
			continue
		}
		if part++; part <= done {
			continue
		}
		if err := c.api.callRetry(ctx, "sendMessage", map[string]string{"chat_id": chatID, "text": chunk}, nil); err != nil {
			return err
		}
		p.Delivered(ctx, part)
	}
	return nil
}

// split cuts text into chunks of at most limit UTF-16 code units whose
// concatenation is text: after the last newline of a full chunk when it
// lies in the chunk's second half, else after its last space there, else
// at the limit (never inside a character).
func split(text string, limit int) []string {
	var out []string
	for len(text) > 0 {
		cut, units := 0, 0
		for cut < len(text) {
			r, size := utf8.DecodeRuneInString(text[cut:])
			n := utf16.RuneLen(r)
			if units+n > limit {
				break
			}
			units += n
			cut += size
		}
		if cut == len(text) {
			out = append(out, text)
			break
		}
		if cut == 0 { // a limit below one character: one character anyway
			_, cut = utf8.DecodeRuneInString(text)
		}
		chunk := text[:cut]
		if i := strings.LastIndexByte(chunk, '\n'); i >= cut/2 {
			cut = i + 1
		} else if i := strings.LastIndexByte(chunk, ' '); i >= cut/2 {
			cut = i + 1
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return out
}
