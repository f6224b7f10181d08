package telegram

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
)

// The Bot API types the channel reads. Every answer is untrusted input:
// fields are optional, decoding tolerates anything JSON allows, and the
// parsing below never indexes without a bound.

type update struct {
	UpdateID int64    `json:"update_id"`
	Message  *message `json:"message"`
}

type user struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

func (u *user) fullName() string {
	if u.LastName == "" {
		return u.FirstName
	}
	return u.FirstName + " " + u.LastName
}

type chat struct {
	ID   int64  `json:"id"`
	Type string `json:"type"`
}

type entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
	URL    string `json:"url"`
	User   *user  `json:"user"`
}

type fileInfo struct {
	FileID   string `json:"file_id"`
	FileSize int64  `json:"file_size"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Duration int    `json:"duration"`
	MimeType string `json:"mime_type"`
	// audio
	Title     string `json:"title"`
	Performer string `json:"performer"`
	// document
	FileName string `json:"file_name"`
	// sticker
	Emoji      string `json:"emoji"`
	SetName    string `json:"set_name"`
	IsAnimated bool   `json:"is_animated"`
}

type message struct {
	MessageID       int64      `json:"message_id"`
	From            *user      `json:"from"`
	Chat            chat       `json:"chat"`
	Date            int64      `json:"date"`
	Text            string     `json:"text"`
	Caption         string     `json:"caption"`
	Entities        []entity   `json:"entities"`
	CaptionEntities []entity   `json:"caption_entities"`
	ReplyToMessage  *message   `json:"reply_to_message"`
	Photo           []fileInfo `json:"photo"`
	Audio           *fileInfo  `json:"audio"`
	Sticker         *fileInfo  `json:"sticker"`
	Video           *fileInfo  `json:"video"`
	Voice           *fileInfo  `json:"voice"`
	Document        *fileInfo  `json:"document"`
	VideoNote       *fileInfo  `json:"video_note"`
}

// decodeUpdates decodes a getUpdates result one update at a time, so one
// malformed update is reported and skipped without losing the others. The
// ids of undecodable updates still count in maxID when they can be read.
func decodeUpdates(raw []byte) (updates []update, maxID int64, errs []error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, 0, []error{fmt.Errorf("decoding updates: %w", err)}
	}
	for _, item := range items {
		var u update
		err := json.Unmarshal(item, &u)
		if err != nil {
			var id struct {
				UpdateID int64 `json:"update_id"`
			}
			if json.Unmarshal(item, &id) == nil {
				u = update{UpdateID: id.UpdateID}
			}
			errs = append(errs, fmt.Errorf("decoding update %d: %w", u.UpdateID, err))
		}
		maxID = max(maxID, u.UpdateID)
		if err == nil {
			updates = append(updates, u)
		}
	}
	return updates, maxID, errs
}

// The message types (Bub's _message_type).
const (
	typeText      = "text"
	typePhoto     = "photo"
	typeAudio     = "audio"
	typeSticker   = "sticker"
	typeVideo     = "video"
	typeVoice     = "voice"
	typeDocument  = "document"
	typeVideoNote = "video_note"
	typeUnknown   = "unknown"
)

// messageType is Bub's _message_type: the first kind of content present.
func (m *message) messageType() string {
	switch {
	case m.Text != "":
		return typeText
	case len(m.Photo) > 0:
		return typePhoto
	case m.Audio != nil:
		return typeAudio
	case m.Sticker != nil:
		return typeSticker
	case m.Video != nil:
		return typeVideo
	case m.Voice != nil:
		return typeVoice
	case m.Document != nil:
		return typeDocument
	case m.VideoNote != nil:
		return typeVideoNote
	}
	return typeUnknown
}

// mediaTypes maps a message type to a media item type; others are
// documents.
var mediaTypes = map[string]string{
	typePhoto: "image", typeSticker: "image",
	typeAudio: "audio", typeVoice: "audio",
	typeVideo: "video", typeVideoNote: "video",
}

// mediaMeta is the "media" member of the JSON content: what Bub's parsers
// record of a file (null fields left out).
type mediaMeta struct {
	FileID     string `json:"file_id,omitempty"`
	FileName   string `json:"file_name,omitempty"`
	FileSize   int64  `json:"file_size,omitempty"`
	Width      int    `json:"width,omitempty"`
	Height     int    `json:"height,omitempty"`
	Duration   int    `json:"duration,omitempty"`
	Title      string `json:"title,omitempty"`
	Performer  string `json:"performer,omitempty"`
	MimeType   string `json:"mime_type,omitempty"`
	Emoji      string `json:"emoji,omitempty"`
	SetName    string `json:"set_name,omitempty"`
	IsAnimated *bool  `json:"is_animated,omitempty"`
	// size is the file's size as Telegram reported it, whether or not
	// Bub records it in the metadata; it decides the download.
	size int64
}

func newMediaMeta(f *fileInfo, mime string) *mediaMeta {
	return &mediaMeta{FileID: f.FileID, FileSize: f.FileSize, Width: f.Width, Height: f.Height, Duration: f.Duration, MimeType: mime, size: f.FileSize}
}

// parseContent is Bub's TelegramMessageParser content parsing: the text,
// or a label describing the media, and the media's metadata.
func (m *message) parseContent() (string, *mediaMeta) {
	switch m.messageType() {
	case typeText:
		return m.Text, nil
	case typePhoto:
		label := withCaption("[Photo message]", m.Caption)
		largest := &m.Photo[len(m.Photo)-1]
		return label, newMediaMeta(largest, "image/jpeg")
	case typeAudio:
		a := m.Audio
		meta := newMediaMeta(a, or(a.MimeType, "audio/mpeg"))
		meta.Title, meta.Performer = a.Title, a.Performer
		title := or(a.Title, "Unknown")
		if a.Performer != "" {
			return fmt.Sprintf("[Audio: %s - %s (%ds)]", a.Performer, title, a.Duration), meta
		}
		return fmt.Sprintf("[Audio: %s (%ds)]", title, a.Duration), meta
	case typeSticker:
		s := m.Sticker
		mime := "image/webp"
		if s.IsAnimated {
			mime = "video/webm"
		}
		animated := s.IsAnimated
		meta := &mediaMeta{FileID: s.FileID, Width: s.Width, Height: s.Height, MimeType: mime, Emoji: s.Emoji, SetName: s.SetName, IsAnimated: &animated, size: s.FileSize}
		if s.Emoji != "" {
			return fmt.Sprintf("[Sticker: %s from %s]", s.Emoji, s.SetName), meta
		}
		return fmt.Sprintf("[Sticker from %s]", s.SetName), meta
	case typeVideo:
		return withCaption(fmt.Sprintf("[Video: %ds]", m.Video.Duration), m.Caption), newMediaMeta(m.Video, or(m.Video.MimeType, "video/mp4"))
	case typeVoice:
		v := m.Voice
		return fmt.Sprintf("[Voice message: %ds]", v.Duration), &mediaMeta{FileID: v.FileID, Duration: v.Duration, MimeType: or(v.MimeType, "audio/ogg"), size: v.FileSize}
	case typeDocument:
		d := m.Document
		mime := or(d.MimeType, "application/octet-stream")
		label := withCaption(fmt.Sprintf("[Document: %s (%s)]", or(d.FileName, "unknown"), mime), m.Caption)
		return label, &mediaMeta{FileID: d.FileID, FileName: d.FileName, FileSize: d.FileSize, MimeType: mime, size: d.FileSize}
	case typeVideoNote:
		v := m.VideoNote
		return fmt.Sprintf("[Video note: %ds]", v.Duration), &mediaMeta{FileID: v.FileID, Duration: v.Duration, MimeType: or(v.MimeType, "video/mp4"), size: v.FileSize}
	}
	return "[Unsupported message type: " + typeUnknown + "]", nil
}

func withCaption(label, caption string) string {
	if caption == "" {
		return label
	}
	return label + " Caption: " + caption
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// slice returns the part of text an entity covers; offsets and lengths
// count UTF-16 code units and are clamped to the text.
func slice(text string, offset, length int) string {
	units := utf16.Encode([]rune(text))
	start := min(max(offset, 0), len(units))
	end := min(max(start+max(length, 0), start), len(units))
	return string(utf16.Decode(units[start:end]))
}

// links is Bub's _extract_links: text_link URLs and url entities, from the
// text's entities, else the caption's, deduplicated in order.
func (m *message) links() []string {
	entities, source := m.Entities, m.Text
	if len(entities) == 0 {
		entities, source = m.CaptionEntities, m.Caption
	}
	var out []string
	for _, e := range entities {
		var u string
		switch e.Type {
		case "text_link":
			u = e.URL
		case "url":
			u = strings.TrimSpace(slice(source, e.Offset, e.Length))
		}
		if u != "" && !contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// bot is what getMe told about the bot.
type bot struct {
	ID       int64
	Username string // lower-cased
}

// isActive is Bub's BubMessageFilter: whether the message addresses the
// bot. Private chats always do; in groups a message must mention the bot
// (its @username, a mention or text_mention entity, or the word "bub") or
// reply to it, and a non-text message without a caption must reply to
// it. Unknown message types and other chat types never do.
func (m *message) isActive(b bot) bool {
	typ := m.messageType()
	if typ == typeUnknown {
		return false
	}
	switch m.Chat.Type {
	case "private":
		return true
	case "group", "supergroup":
		reply := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == b.ID
		if typ != typeText && m.Caption == "" {
			return reply
		}
		return reply || m.mentions(b)
	}
	return false
}

// mentions reports whether the text or caption mentions the bot. Unlike
// Bub, mention entities are sliced from the unstripped text in UTF-16
// units, as Telegram counts offsets.
func (m *message) mentions(b bot) bool {
	source := or(m.Text, m.Caption)
	content := strings.ToLower(strings.TrimSpace(source))
	at := "@" + b.Username
	if strings.Contains(content, "bub") || (b.Username != "" && strings.Contains(content, at)) {
		return true
	}
	for _, e := range append(append([]entity(nil), m.Entities...), m.CaptionEntities...) {
		switch e.Type {
		case "mention":
			if b.Username != "" && strings.ToLower(slice(source, e.Offset, e.Length)) == at {
				return true
			}
		case "text_mention":
			if e.User != nil && e.User.ID == b.ID {
				return true
			}
		}
	}
	return false
}

// command reports whether a message is a bot command (its first entity
// is a bot_command at offset 0, as Telegram's and python-telegram-bot's
// command filter require). name is the command without the slash,
// lower-cased, "" when an "@botname" suffix names another bot; rest is the
// text after the command word.
func (m *message) command(b bot) (name, rest string, isCommand bool) {
	if len(m.Entities) == 0 || m.Entities[0].Type != "bot_command" || m.Entities[0].Offset != 0 {
		return "", "", false
	}
	word := slice(m.Text, 0, m.Entities[0].Length)
	name, target, addressed := strings.Cut(strings.TrimPrefix(word, "/"), "@")
	if addressed && !strings.EqualFold(target, b.Username) {
		return "", "", true
	}
	return strings.ToLower(name), strings.TrimPrefix(m.Text, word), true
}
