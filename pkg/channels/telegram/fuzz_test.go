package telegram

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzDecodeUpdates feeds arbitrary getUpdates results through decoding,
// command routing, the mention filter and envelope building: nothing may
// panic, and a built envelope always carries the chat's session.
func FuzzDecodeUpdates(f *testing.F) {
	f.Add([]byte(`[{"update_id":1,"message":{"message_id":2,"date":3,"chat":{"id":4,"type":"group"},"from":{"id":5,"first_name":"A"},"text":"/bub@helper_bot hi @helper_bot","entities":[{"type":"bot_command","offset":0,"length":15},{"type":"mention","offset":19,"length":11},{"type":"url","offset":-3,"length":99}]}}]`))
	f.Add([]byte(`[{"update_id":9,"message":{"chat":{"id":1,"type":"private"},"from":{"id":1},"photo":[],"reply_to_message":{"from":{"id":7000},"sticker":{"file_id":"s","is_animated":true}}}}]`))
	f.Add([]byte(`[{"update_id":"x"},{"update_id":3,"message":"no"},{"update_id":4,"message":{"caption":"😀😀","caption_entities":[{"type":"text_link","url":"u"},{"type":"mention","offset":1,"length":1}],"chat":{"type":"supergroup"},"from":{"id":1},"document":{}}}]`))
	f.Add([]byte(`{"ok":true}`))
	f.Add([]byte(`null`))
	b := bot{ID: 7000, Username: "helper_bot"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		updates, maxID, _ := decodeUpdates(raw)
		for _, u := range updates {
			if u.UpdateID > maxID {
				t.Fatalf("update %d above max %d", u.UpdateID, maxID)
			}
			m := u.Message
			if m == nil {
				continue
			}
			name, _, isCommand := m.command(b)
			m.isActive(b)
			env, refs := build(m, b, isCommand && name == "bub")
			if env.SessionID != "telegram:"+env.ChatID || env.Content == "" && len(refs) > 0 {
				t.Fatalf("envelope %+v refs %d", env, len(refs))
			}
		}
	})
}

// FuzzSplit checks that replies of any content split into chunks
// Telegram accepts that add up to the text.
func FuzzSplit(f *testing.F) {
	f.Add(`{"message":"hello"}`, 10)
	f.Add("a b\nc 😀😀 d", 3)
	f.Add("\xff\xfe broken", 2)
	f.Fuzz(func(t *testing.T, content string, limit int) {
		limit = 1 + abs(limit%64)
		text := replyText(content)
		chunks := split(text, limit)
		if got := strings.Join(chunks, ""); got != text {
			t.Fatalf("chunks %q do not add up to %q", chunks, text)
		}
		for _, ch := range chunks {
			if ch == "" {
				t.Fatal("empty chunk")
			}
			if n := len(utf16.Encode([]rune(ch))); n > limit && utf8.RuneCountInString(ch) > 1 {
				t.Fatalf("chunk %q has %d units, limit %d", ch, n, limit)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
