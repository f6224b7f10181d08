package telegram

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// Name is the channel's name, its envelopes' channel and output_channel.
const Name = "telegram"

// The replies the channel sends itself.
const (
	OnlineMessage   = "Bub is online. Send text to start."
	NoAccessMessage = "You are not allowed to chat with me. Please deploy your own instance of Bub."
	DeniedMessage   = "Access denied."
)

// MaxDownload is the largest file the channel downloads and inlines into
// an envelope's media (Bub's 2 MB).
const MaxDownload = 2 << 20

// Timing of the typing indicator and of polling after failures.
const (
	// typingEvery refreshes "typing" (Telegram shows it for 5 s).
	typingEvery = 4 * time.Second
	// typingFor bounds a typing loop whose reply never reaches Send here
	// (the reply went through another gateway, or there was none).
	typingFor = 2 * time.Minute
	// handleAttempts bounds the handler calls for one message.
	handleAttempts = 3
	// backoffMin and backoffMax bound the wait after a failed poll.
	backoffMin = time.Second
	backoffMax = 30 * time.Second
	// downloadTimeout bounds one media download.
	downloadTimeout = 30 * time.Second
	// callTimeout bounds a call the channel makes on its own (a typing
	// action, a /start or access reply).
	callTimeout = 30 * time.Second
)

// Interface guards.
var (
	_ channels.Channel   = (*Channel)(nil)
	_ channels.Sender    = (*Channel)(nil)
	_ channels.Debouncer = (*Channel)(nil)
	_ channels.Toggler   = (*Channel)(nil)
)

// Channel is Bub's Telegram channel: it long-polls the Bot API, hands
// accepted messages to its handler and sends replies. Construct it with
// [New].
type Channel struct {
	cfg        Config
	handler    hooks.MessageHandler
	log        *slog.Logger
	api        *client
	allowUsers map[string]bool
	allowChats map[string]bool

	// typingEvery and typingFor are the typing loop's timing (tests
	// shorten them).
	typingEvery time.Duration
	typingFor   time.Duration

	mu      sync.Mutex
	started bool
	bot     bot
	cancel  context.CancelFunc
	runCtx  context.Context
	typing  map[string]*typingLoop
	// wg owns the poll loop and every typing loop.
	wg sync.WaitGroup
}

// New returns a Telegram channel; it does no I/O. cfg is validated (a
// zero Config is a valid, disabled channel). handler receives every
// accepted message; log may be nil.
func New(cfg Config, handler hooks.MessageHandler, log *slog.Logger) (*Channel, error) {
	if handler == nil {
		return nil, errors.New("telegram channel: nil message handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("telegram channel: %w", err)
	}
	api, err := newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("telegram channel: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Channel{
		cfg:         cfg,
		handler:     handler,
		log:         log.With("channel", Name),
		api:         api,
		allowUsers:  set(cfg.AllowUsers),
		allowChats:  set(cfg.AllowChats),
		typingEvery: typingEvery,
		typingFor:   typingFor,
		typing:      map[string]*typingLoop{},
	}, nil
}

func set(list []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range list {
		m[s] = true
	}
	return m
}

// Name returns "telegram".
func (c *Channel) Name() string { return Name }

// Enabled reports whether a bot token is configured.
func (c *Channel) Enabled() bool { return c.cfg.Enabled() }

// NeedsDebounce returns true: a chat's messages are batched until the
// conversation pauses.
func (c *Channel) NeedsDebounce() bool { return true }

// Start asks getMe who the bot is, drops the updates that arrived while
// the bot was offline (deleteWebhook with drop_pending_updates, as Bub's
// polling does) and starts long polling. It returns once polling runs;
// polling stops when Stop is called or ctx ends.
func (c *Channel) Start(ctx context.Context) error {
	if !c.Enabled() {
		return errors.New("telegram channel: no bot token configured")
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("telegram channel: already started")
	}
	c.started = true
	c.mu.Unlock()
	var me user
	if err := c.api.callRetry(ctx, "getMe", struct{}{}, &me); err != nil {
		c.setStarted(false)
		return fmt.Errorf("telegram channel: %w", err)
	}
	if err := c.api.callRetry(ctx, "deleteWebhook", map[string]bool{"drop_pending_updates": true}, nil); err != nil {
		c.setStarted(false)
		return fmt.Errorf("telegram channel: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.bot = bot{ID: me.ID, Username: strings.ToLower(me.Username)}
	c.runCtx, c.cancel = runCtx, cancel
	c.mu.Unlock()
	c.log.Info("telegram polling", "bot", me.Username, "allow_users", len(c.allowUsers), "allow_chats", len(c.allowChats), "proxy", c.cfg.Proxy != "")
	c.wg.Go(func() { c.poll(runCtx) })
	return nil
}

func (c *Channel) setStarted(v bool) {
	c.mu.Lock()
	c.started = v
	c.mu.Unlock()
}

// Stop ends polling and every typing indicator, and waits for them (or
// for ctx).
func (c *Channel) Stop(ctx context.Context) error {
	c.mu.Lock()
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		c.log.Info("telegram stopped")
		return nil
	case <-ctx.Done():
		return fmt.Errorf("telegram channel: stopping: %w", ctx.Err())
	}
}

// poll is the long-polling loop: getUpdates from the offset after the last
// update seen, each message handled in order.
func (c *Channel) poll(ctx context.Context) {
	var offset int64
	backoff := backoffMin
	timeout := c.cfg.pollTimeout()
	for ctx.Err() == nil {
		var raw json.RawMessage
		callCtx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
		err := c.api.call(callCtx, "getUpdates", map[string]any{
			"offset":          offset,
			"timeout":         int(timeout / time.Second),
			"allowed_updates": []string{"message"},
		}, &raw)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait, fatal := pollWait(err, backoff)
			if fatal {
				c.log.Error("telegram polling stopped", "error", err)
				return
			}
			c.log.Warn("telegram getUpdates failed", "error", err, "retry_in", wait)
			if sleep(ctx, wait) != nil {
				return
			}
			backoff = min(backoff*2, backoffMax)
			continue
		}
		updates, maxID, errs := decodeUpdates(raw)
		for _, err := range errs {
			c.log.Warn("telegram update dropped", "error", err)
		}
		if maxID < offset && len(errs)+len(updates) > 0 {
			// An answer without a new update: a misbehaving server must
			// not make the loop spin.
			if sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(backoff*2, backoffMax)
			continue
		}
		backoff = backoffMin
		seen := offset // updates below it were handled already
		offset = max(offset, maxID+1)
		for _, u := range updates {
			if u.Message != nil && u.UpdateID >= seen {
				c.handle(ctx, u.Message)
			}
		}
	}
}

// pollWait says how long to wait after a failed getUpdates, and whether
// the failure is one retrying cannot fix (a revoked token).
func pollWait(err error, backoff time.Duration) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Code {
		case http.StatusUnauthorized, http.StatusNotFound:
			return 0, true
		case http.StatusTooManyRequests:
			return min(max(ae.RetryAfter, backoff), maxRetryAfter), false
		}
	}
	return backoff, false
}

// handle routes one message as Bub's handlers do: /start answers, /bub
// with arguments and every non-command message go to the handler, other
// commands are ignored.
func (c *Channel) handle(ctx context.Context, m *message) {
	b := c.botInfo()
	chatID := strconv.FormatInt(m.Chat.ID, 10)
	name, rest, isCommand := m.command(b)
	switch {
	case isCommand && name == "start":
		text := OnlineMessage
		if !c.chatAllowed(chatID) {
			text = NoAccessMessage
		}
		c.reply(ctx, chatID, text)
		return
	case isCommand && (name != "bub" || strings.TrimSpace(rest) == ""):
		return
	}
	if !c.chatAllowed(chatID) || m.From == nil {
		return
	}
	if len(c.allowUsers) > 0 && !c.allowUsers[strconv.FormatInt(m.From.ID, 10)] && (m.From.Username == "" || !c.allowUsers[m.From.Username]) {
		c.reply(ctx, chatID, DeniedMessage)
		return
	}
	env, refs := build(m, b, isCommand)
	env.Media = c.fetchMedia(ctx, refs)
	if env.IsActive && env.Kind != envelope.KindCommand {
		c.startTyping(chatID)
	}
	var err error
	for attempt := range handleAttempts {
		if attempt > 0 && sleep(ctx, time.Duration(attempt)*backoffMin) != nil {
			break
		}
		if err = c.handler(ctx, env); err == nil {
			return
		}
	}
	c.stopTyping(chatID)
	c.log.Error("telegram message not delivered to the handler", "chat_id", chatID, "message_id", m.MessageID, "error", err)
}

func (c *Channel) botInfo() bot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bot
}

func (c *Channel) chatAllowed(chatID string) bool {
	return len(c.allowChats) == 0 || c.allowChats[chatID]
}

// reply sends a text the channel answers itself; a failure is logged.
func (c *Channel) reply(ctx context.Context, chatID, text string) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := c.sendText(ctx, chatID, text); err != nil {
		c.log.Warn("telegram reply failed", "chat_id", chatID, "error", err)
	}
}

// payload is the JSON content of a non-command message (Bub's
// {"message": ..., **metadata}); Bub's nulls are left out.
type payload struct {
	Message        string     `json:"message"`
	MessageID      int64      `json:"message_id"`
	Type           string     `json:"type"`
	Username       string     `json:"username,omitempty"`
	FullName       string     `json:"full_name"`
	SenderID       string     `json:"sender_id"`
	SenderIsBot    bool       `json:"sender_is_bot"`
	Date           int64      `json:"date,omitempty"`
	Links          []string   `json:"links,omitempty"`
	Media          *mediaMeta `json:"media,omitempty"`
	ReplyToMessage *payload   `json:"reply_to_message,omitempty"`
}

// newPayload is Bub's parse: content and metadata of m.
func newPayload(m *message) *payload {
	content, media := m.parseContent()
	from := m.From
	if from == nil { // the channel only builds messages with a sender
		from = &user{}
	}
	return &payload{
		Message:     content,
		MessageID:   m.MessageID,
		Type:        m.messageType(),
		Username:    from.Username,
		FullName:    from.fullName(),
		SenderID:    strconv.FormatInt(from.ID, 10),
		SenderIsBot: from.IsBot,
		Date:        m.Date,
		Links:       m.links(),
		Media:       media,
	}
}

// mediaRef is a file to download into an envelope's media.
type mediaRef struct {
	item   envelope.Media
	fileID string
	size   int64
}

func newMediaRef(typ string, meta *mediaMeta) (mediaRef, bool) {
	if meta == nil || meta.FileID == "" {
		return mediaRef{}, false
	}
	mt, ok := mediaTypes[typ]
	if !ok {
		mt = "document"
	}
	return mediaRef{item: envelope.Media{Type: mt, MimeType: meta.MimeType, Filename: meta.FileName}, fileID: meta.FileID, size: meta.size}, true
}

// build is Bub's _build_message: a comma command (after a "/bub "
// prefix) becomes a plain command envelope; anything else becomes JSON
// content with the media of the message and of the message it replies
// to. Every envelope's output_channel is "telegram" (see the package
// documentation for why this differs from Bub).
func build(m *message, b bot, isCommand bool) (*envelope.Envelope, []mediaRef) {
	chatID := strconv.FormatInt(m.Chat.ID, 10)
	env := &envelope.Envelope{
		ID:            Name + ":" + chatID + ":" + strconv.FormatInt(m.MessageID, 10),
		Channel:       Name,
		ChatID:        chatID,
		SessionID:     Name + ":" + chatID,
		OutputChannel: Name,
		Kind:          envelope.KindNormal,
	}
	p := newPayload(m)
	if isCommand { // "/bub <args>": the command word and one space go
		_, rest, _ := m.command(b)
		p.Message = strings.TrimPrefix(rest, " ")
	}
	if _, ok := tools.CommandLine(p.Message); ok {
		env.Content = strings.TrimSpace(p.Message)
		env.Kind = envelope.KindCommand
		return env, nil
	}
	var refs []mediaRef
	if r, ok := newMediaRef(p.Type, p.Media); ok {
		refs = append(refs, r)
	}
	if rm := m.ReplyToMessage; rm != nil && rm.From != nil {
		p.ReplyToMessage = newPayload(rm)
		if r, ok := newMediaRef(p.ReplyToMessage.Type, p.ReplyToMessage.Media); ok {
			refs = append(refs, r)
		}
	}
	env.Content = marshal(p)
	env.IsActive = m.isActive(b)
	return env, refs
}

// marshal encodes v as compact JSON keeping non-ASCII and HTML characters
// as they are (Bub's ensure_ascii=False).
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings, numbers, booleans and nested structs of them:
		// encoding cannot fail.
		return "{}"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fetchMedia downloads the files of refs no larger than MaxDownload and
// returns them as media items with data URLs. Files over the limit, or
// whose download fails, are left out (their metadata stays in the
// content).
func (c *Channel) fetchMedia(ctx context.Context, refs []mediaRef) []envelope.Media {
	var out []envelope.Media
	for _, r := range refs {
		if r.size > MaxDownload {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, downloadTimeout)
		data, err := c.api.download(dctx, r.fileID, MaxDownload)
		cancel()
		if err != nil {
			if !errors.Is(err, errTooLarge) {
				c.log.Warn("telegram media download failed", "file_id", r.fileID, "error", err)
			}
			continue
		}
		item := r.item
		item.URL = "data:" + item.MimeType + ";base64," + base64.StdEncoding.EncodeToString(data)
		out = append(out, item)
	}
	return out
}

// typingLoop is one chat's typing indicator.
type typingLoop struct {
	stop  chan struct{}
	done  chan struct{}
	until time.Time // guarded by Channel.mu
}

// startTyping starts the chat's typing indicator, or extends the running
// one, until stopTyping or typingFor from now.
func (c *Channel) startTyping(chatID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runCtx == nil || c.runCtx.Err() != nil {
		return
	}
	if t, ok := c.typing[chatID]; ok {
		t.until = time.Now().Add(c.typingFor)
		return
	}
	t := &typingLoop{stop: make(chan struct{}), done: make(chan struct{}), until: time.Now().Add(c.typingFor)}
	c.typing[chatID] = t
	ctx := c.runCtx
	c.wg.Go(func() {
		defer close(t.done)
		c.runTyping(ctx, chatID, t)
	})
}

// runTyping sends "typing" every typingEvery until stopped, expired, a
// send fails or ctx ends; it removes itself from the chat's entry.
func (c *Channel) runTyping(ctx context.Context, chatID string, t *typingLoop) {
	defer func() {
		c.mu.Lock()
		if c.typing[chatID] == t {
			delete(c.typing, chatID)
		}
		c.mu.Unlock()
	}()
	tick := time.NewTicker(c.typingEvery)
	defer tick.Stop()
	for {
		c.mu.Lock()
		expired := time.Now().After(t.until)
		c.mu.Unlock()
		if expired {
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := c.api.call(callCtx, "sendChatAction", map[string]string{"chat_id": chatID, "action": "typing"}, nil)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("telegram typing indicator stopped", "chat_id", chatID, "error", err)
			}
			return
		}
		select {
		case <-tick.C:
		case <-t.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// stopTyping stops the chat's typing indicator and waits for its loop.
func (c *Channel) stopTyping(chatID string) {
	c.mu.Lock()
	t, ok := c.typing[chatID]
	if ok {
		delete(c.typing, chatID)
		close(t.stop)
	}
	c.mu.Unlock()
	if ok {
		<-t.done
	}
}
