package envelope

import (
	"errors"
	"fmt"
	"strings"
)

// Envelope kinds.
const (
	KindNormal  = "normal"
	KindCommand = "command"
	KindError   = "error"
)

// Envelope is one message entering or leaving a turn (Bub's Envelope /
// ChannelMessage). Inbound envelopes are published by ingress; outbound
// envelopes are rendered by render_outbound and dispatched by
// dispatch_outbound.
type Envelope struct {
	// ID is unique per envelope; ingress deduplicates inbound envelopes by
	// it, channel adapters deduplicate outbound ones.
	ID            string   `json:"id"`
	Content       string   `json:"content"`
	Channel       string   `json:"channel,omitempty"`
	ChatID        string   `json:"chat_id,omitempty"`
	SessionID     string   `json:"session_id,omitempty"`
	Context       *Context `json:"context,omitempty"`
	Media         []Media  `json:"media,omitempty"`
	Kind          string   `json:"kind,omitempty"`
	OutputChannel string   `json:"output_channel,omitempty"`
	IsActive      bool     `json:"is_active,omitempty"`
	// InReplyTo is the id of the inbound envelope an outbound answers.
	InReplyTo string `json:"in_reply_to,omitempty"`
	// BatchIndex and BatchSize place an outbound envelope in the batch of
	// its turn (0-based index), so a waiting sender knows when it has every
	// reply.
	BatchIndex int `json:"batch_index,omitempty"`
	BatchSize  int `json:"batch_size,omitempty"`
}

// Media is one attached media item (Bub's MediaItem). Data holds inline
// bytes as a data URL when the sender supplied them.
type Media struct {
	Type     string `json:"type"` // image, audio, video, document
	MimeType string `json:"mime_type"`
	Filename string `json:"filename,omitempty"`
	URL      string `json:"url,omitempty"`
}

// Default is the channel, chat id and output channel of an envelope that
// names none.
const Default = "default"

// ChannelOrDefault returns the channel, or [Default] when empty.
func (e *Envelope) ChannelOrDefault() string { return orDefault(e.Channel) }

// ChatIDOrDefault returns the chat id, or [Default] when empty.
func (e *Envelope) ChatIDOrDefault() string { return orDefault(e.ChatID) }

func orDefault(s string) string {
	if s == "" {
		return Default
	}
	return s
}

// DefaultSessionID is Bub's fallback session id "<channel>:<chat_id>".
func (e *Envelope) DefaultSessionID() string {
	return e.ChannelOrDefault() + ":" + e.ChatIDOrDefault()
}

// ContextStr is Bub's context_str of the envelope's context.
func (e *Envelope) ContextStr() string { return e.Context.Str() }

// Clone returns a copy with its own context and media slice.
func (e *Envelope) Clone() *Envelope {
	c := *e
	if e.Context != nil {
		c.Context = e.Context.Clone()
	}
	c.Media = append([]Media(nil), e.Media...)
	return &c
}

// Normalize applies Bub's ChannelMessage construction rules in place: the
// context gains channel="$<channel>" and chat_id, and an empty
// output_channel becomes the channel.
func (e *Envelope) Normalize() {
	if e.Context == nil {
		e.Context = &Context{}
	}
	if e.Channel != "" {
		e.Context.Set("channel", "$"+e.Channel)
	}
	if e.ChatID != "" {
		e.Context.Set("chat_id", e.ChatID)
	}
	if e.OutputChannel == "" {
		e.OutputChannel = e.Channel
	}
	if e.Kind == "" {
		e.Kind = KindNormal
	}
}

// MaxNameBytes bounds the names that become NATS subject tokens: an
// envelope's id, session id, channel, chat id and output channel, and a
// session id resolve_session answers. A token takes up to three bytes per
// byte, and a subject must fit the NATS protocol's control line (4 KB by
// default), past which the server closes the connection that sent it.
const MaxNameBytes = 256

// ErrNameTooLong is the error of [CheckName].
var ErrNameTooLong = fmt.Errorf("longer than %d bytes", MaxNameBytes)

// CheckName returns an error naming what when name is longer than
// [MaxNameBytes].
func CheckName(what, name string) error {
	if len(name) > MaxNameBytes {
		return fmt.Errorf("%s of %d bytes: %w", what, len(name), ErrNameTooLong)
	}
	return nil
}

// Validation errors.
var (
	ErrNoID = errors.New("envelope: id is required")
	// ErrIDSpace: the id is its message's Nats-Msg-Id, a header value,
	// which NATS clients trim and keep on one line, so "a " would be
	// deduplicated as a copy of "a".
	ErrIDSpace   = errors.New("envelope: id must not start or end with white space or hold a line break")
	ErrNoContent = errors.New("envelope: content is required")
	ErrKind      = errors.New("envelope: kind must be normal, command or error")
)

// Validate reports what makes an inbound envelope unusable: no id, an id
// with white space at an end or a line break, no content, an unknown
// kind, or an id, session id, channel, chat id or output channel longer
// than [MaxNameBytes].
func (e *Envelope) Validate() error {
	var errs []error
	switch {
	case strings.TrimSpace(e.ID) == "":
		errs = append(errs, ErrNoID)
	case strings.TrimSpace(e.ID) != e.ID || strings.ContainsAny(e.ID, "\r\n"):
		errs = append(errs, ErrIDSpace)
	}
	if e.Content == "" && len(e.Media) == 0 {
		errs = append(errs, ErrNoContent)
	}
	switch e.Kind {
	case "", KindNormal, KindCommand, KindError:
	default:
		errs = append(errs, ErrKind)
	}
	for _, f := range [...]struct{ name, value string }{
		{"envelope: id", e.ID}, {"envelope: session_id", e.SessionID}, {"envelope: channel", e.Channel},
		{"envelope: chat_id", e.ChatID}, {"envelope: output_channel", e.OutputChannel},
	} {
		if err := CheckName(f.name, f.value); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
