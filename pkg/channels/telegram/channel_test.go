package telegram

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/channels/telegram/telegramtest"
	"github.com/bubbus/bub/pkg/envelope"
)

// Behaviour check 86, with this runtime's output_channel (see doc.go).
func TestCheck86(t *testing.T) {
	ctx := testCtx(t)
	c, srv, rec := running(t, nil)

	t.Run("json message is sent, blank skipped", func(t *testing.T) {
		for _, content := range []string{`{"message":"hello"}`, "", "   ", `{"message":"  "}`, "plain text"} {
			if err := c.Send(ctx, &envelope.Envelope{Content: content, ChatID: "5", OutputChannel: Name}); err != nil {
				t.Fatalf("Send(%q): %v", content, err)
			}
		}
		sent, err := srv.WaitSent(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(sent); !slices.Equal(got, []string{"hello", "plain text"}) || sent[0].ChatID != "5" {
			t.Fatalf("sent %q to %s, want [hello plain text] to 5", got, sent[0].ChatID)
		}
	})

	t.Run("comma command keeps output_channel telegram", func(t *testing.T) {
		send(t, srv, 10, "  ,tape.info  ")
		envs, err := rec.wait(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := envs[0]
		want := envelope.Envelope{ID: got.ID, Content: ",tape.info", Channel: Name, ChatID: "10", SessionID: "telegram:10", Kind: envelope.KindCommand, OutputChannel: Name}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("got %+v, want %+v", *got, want)
		}
	})

	t.Run("other messages get JSON content with reply_to_message", func(t *testing.T) {
		bot := srv.Bot()
		original := srv.Message(10, "earlier answer", telegramtest.From(telegramtest.User{ID: bot.ID, IsBot: true, FirstName: bot.FirstName, Username: bot.Username}))
		m := send(t, srv, 10, "and <then>? ünïcode", telegramtest.ReplyTo(original))
		envs, err := rec.wait(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		got := envs[1]
		if got.OutputChannel != Name || got.Kind != envelope.KindNormal || !got.IsActive || got.SessionID != "telegram:10" || got.ChatID != "10" || got.Channel != Name {
			t.Fatalf("envelope %+v", *got)
		}
		wantID := "telegram:10:" + strconv.FormatInt(m["message_id"].(int64), 10)
		if got.ID != wantID {
			t.Fatalf("id %q, want %q", got.ID, wantID)
		}
		date := strconv.FormatInt(m["date"].(int64), 10)
		want := `{"message":"and <then>? ünïcode","message_id":` + strconv.FormatInt(m["message_id"].(int64), 10) +
			`,"type":"text","username":"ada","full_name":"Ada Lovelace","sender_id":"42","sender_is_bot":false,"date":` + date +
			`,"reply_to_message":{"message":"earlier answer","message_id":` + strconv.FormatInt(original["message_id"].(int64), 10) +
			`,"type":"text","username":"helper_bot","full_name":"Assistant","sender_id":"7000","sender_is_bot":true,"date":` + strconv.FormatInt(original["date"].(int64), 10) + `}}`
		if got.Content != want {
			t.Fatalf("content\n%s\nwant\n%s", got.Content, want)
		}
	})
}

func TestAccessControl(t *testing.T) {
	ctx := testCtx(t)
	_, srv, rec := running(t, func(cfg *Config) {
		cfg.AllowChats = []string{"100", "200"}
		cfg.AllowUsers = []string{"42", "grace"}
	})
	grace := telegramtest.User{ID: 77, FirstName: "Grace", Username: "grace"}
	mallory := telegramtest.User{ID: 66, FirstName: "Mallory", Username: "mallory"}

	send(t, srv, 100, "/start")                            // allowed chat: online
	send(t, srv, 999, "/start")                            // other chat: no access
	send(t, srv, 999, "hello from outside")                // dropped silently
	send(t, srv, 100, "hi", telegramtest.From(mallory))    // access denied
	send(t, srv, 100, "/help")                             // other commands ignored
	send(t, srv, 100, "/start@other_bot")                  // another bot's /start
	send(t, srv, 100, "/bub")                              // /bub without arguments
	send(t, srv, 200, "by name", telegramtest.From(grace)) // allowed by username
	send(t, srv, 100, "/bub  what is up")                  // /bub prefix stripped
	send(t, srv, 100, "/bub@HELPER_BOT ,help")             // addressed /bub command
	send(t, srv, 100, "/start@helper_bot now")             // addressed /start

	envs, err := rec.wait(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := srv.WaitSent(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	wantSent := []telegramtest.SentMessage{
		{ChatID: "100", Text: OnlineMessage},
		{ChatID: "999", Text: NoAccessMessage},
		{ChatID: "100", Text: DeniedMessage},
		{ChatID: "100", Text: OnlineMessage},
	}
	for i := range sent {
		sent[i].MessageID = 0
	}
	if !slices.Equal(sent, wantSent) {
		t.Fatalf("sent %+v, want %+v", sent, wantSent)
	}
	var msgs []string
	for _, e := range envs {
		if e.Kind == envelope.KindCommand {
			msgs = append(msgs, e.Content)
			continue
		}
		var p payload
		if err := json.Unmarshal([]byte(e.Content), &p); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, e.ChatID+":"+p.Username+":"+p.Message)
	}
	if want := []string{"200:grace:by name", "100:ada: what is up", ",help"}; !slices.Equal(msgs, want) {
		t.Fatalf("handled %q, want %q", msgs, want)
	}
	if n := len(rec.all()); n != 3 {
		t.Fatalf("handler called %d times, want 3", n)
	}
}

func TestGroupFilter(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := botOf(srv)
	botUser := telegramtest.User{ID: b.ID, IsBot: true, FirstName: "Assistant", Username: b.Username}
	fromBot := srv.Message(1, "earlier", telegramtest.From(botUser))
	fromOther := srv.Message(1, "earlier", telegramtest.From(telegramtest.User{ID: 9, FirstName: "Other"}))
	group := telegramtest.InChat("group")
	photo := telegramtest.With("photo", []map[string]any{{"file_id": "p1", "width": 10, "height": 10}})
	mention := func(text, at string) telegramtest.MessageOption {
		return telegramtest.With("entities", []map[string]any{{"type": "mention", "offset": len(utf16.Encode([]rune(text[:strings.Index(text, at)]))), "length": len(at)}})
	}
	tests := []struct {
		name string
		text string
		opts []telegramtest.MessageOption
		want bool
	}{
		{"private text", "hello", nil, true},
		{"private photo", "", []telegramtest.MessageOption{photo}, true},
		{"private unknown type", "", []telegramtest.MessageOption{telegramtest.With("location", map[string]any{"latitude": 1.0, "longitude": 2.0})}, false},
		{"group plain", "hello all", []telegramtest.MessageOption{group}, false},
		{"supergroup plain", "hello all", []telegramtest.MessageOption{telegramtest.InChat("supergroup")}, false},
		{"group @username in text", "hi @Helper_Bot", []telegramtest.MessageOption{group}, true},
		{"group mention entity after emoji", "😀 @helper_bot hi", []telegramtest.MessageOption{group, mention("😀 @helper_bot hi", "@helper_bot")}, true},
		{"group mention of another bot", "@other_bot hi", []telegramtest.MessageOption{group, mention("@other_bot hi", "@other_bot")}, false},
		{"group text_mention of the bot", "Assistant, hi", []telegramtest.MessageOption{group, telegramtest.With("entities", []map[string]any{{"type": "text_mention", "offset": 0, "length": 9, "user": botUser}})}, true},
		{"group keyword bub", "what does BUB think", []telegramtest.MessageOption{group}, true},
		{"group reply to the bot", "thanks", []telegramtest.MessageOption{group, telegramtest.ReplyTo(fromBot)}, true},
		{"group reply to someone else", "thanks", []telegramtest.MessageOption{group, telegramtest.ReplyTo(fromOther)}, false},
		{"group photo without caption", "", []telegramtest.MessageOption{group, photo}, false},
		{"group photo without caption replying to the bot", "", []telegramtest.MessageOption{group, photo, telegramtest.ReplyTo(fromBot)}, true},
		{"group photo with caption naming bub", "", []telegramtest.MessageOption{group, photo, telegramtest.With("caption", "look, bub")}, true},
		{"group photo with unrelated caption", "", []telegramtest.MessageOption{group, photo, telegramtest.With("caption", "look")}, false},
		{"channel post", "bub", []telegramtest.MessageOption{telegramtest.InChat("channel")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decode(t, srv.Message(-5, tt.text, tt.opts...))
			if got := m.isActive(b); got != tt.want {
				t.Fatalf("isActive = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("through polling", func(t *testing.T) {
		ctx := testCtx(t)
		_, srv, rec := running(t, nil)
		send(t, srv, -5, "hello all", group)
		send(t, srv, -5, "@helper_bot hi", group)
		envs, err := rec.wait(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if envs[0].IsActive || !envs[1].IsActive {
			t.Fatalf("is_active %v %v, want false true", envs[0].IsActive, envs[1].IsActive)
		}
	})
}

func TestContentLabels(t *testing.T) {
	srv := telegramtest.NewServer(t)
	file := func(extra map[string]any) map[string]any {
		m := map[string]any{"file_id": "f1", "file_unique_id": "u1"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	w := telegramtest.With
	tests := []struct {
		name      string
		opts      []telegramtest.MessageOption
		typ       string
		label     string
		mime      string
		mediaType string
	}{
		{"photo", []telegramtest.MessageOption{w("photo", []any{file(map[string]any{"width": 90}), file(map[string]any{"file_id": "big", "width": 800})})}, "photo", "[Photo message]", "image/jpeg", "image"},
		{"photo with caption", []telegramtest.MessageOption{w("photo", []any{file(nil)}), w("caption", "sunset")}, "photo", "[Photo message] Caption: sunset", "image/jpeg", "image"},
		{"audio with performer", []telegramtest.MessageOption{w("audio", file(map[string]any{"duration": 184, "title": "Song", "performer": "Band"}))}, "audio", "[Audio: Band - Song (184s)]", "audio/mpeg", "audio"},
		{"audio without title", []telegramtest.MessageOption{w("audio", file(map[string]any{"duration": 3, "mime_type": "audio/flac"}))}, "audio", "[Audio: Unknown (3s)]", "audio/flac", "audio"},
		{"sticker", []telegramtest.MessageOption{w("sticker", file(map[string]any{"emoji": "👍", "set_name": "Hands", "is_animated": false}))}, "sticker", "[Sticker: 👍 from Hands]", "image/webp", "image"},
		{"animated sticker without emoji", []telegramtest.MessageOption{w("sticker", file(map[string]any{"set_name": "Hands", "is_animated": true}))}, "sticker", "[Sticker from Hands]", "video/webm", "image"},
		{"video", []telegramtest.MessageOption{w("video", file(map[string]any{"duration": 12})), w("caption", "clip")}, "video", "[Video: 12s] Caption: clip", "video/mp4", "video"},
		{"voice", []telegramtest.MessageOption{w("voice", file(map[string]any{"duration": 4}))}, "voice", "[Voice message: 4s]", "audio/ogg", "audio"},
		{"document", []telegramtest.MessageOption{w("document", file(map[string]any{"file_name": "a.pdf", "mime_type": "application/pdf"}))}, "document", "[Document: a.pdf (application/pdf)]", "application/pdf", "document"},
		{"document without name or mime", []telegramtest.MessageOption{w("document", file(nil)), w("caption", "see")}, "document", "[Document: unknown (application/octet-stream)] Caption: see", "application/octet-stream", "document"},
		{"video note", []telegramtest.MessageOption{w("video_note", file(map[string]any{"duration": 7}))}, "video_note", "[Video note: 7s]", "video/mp4", "video"},
		{"unsupported", []telegramtest.MessageOption{w("poll", map[string]any{"id": "1"})}, "unknown", "[Unsupported message type: unknown]", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decode(t, srv.Message(1, "", tt.opts...))
			p := newPayload(m)
			if p.Type != tt.typ || p.Message != tt.label {
				t.Fatalf("type %q message %q, want %q %q", p.Type, p.Message, tt.typ, tt.label)
			}
			if tt.mime == "" {
				if p.Media != nil {
					t.Fatalf("media %+v, want none", p.Media)
				}
				return
			}
			if p.Media == nil || p.Media.MimeType != tt.mime {
				t.Fatalf("media %+v, want mime %s", p.Media, tt.mime)
			}
			ref, ok := newMediaRef(p.Type, p.Media)
			if !ok || ref.item.Type != tt.mediaType || ref.item.MimeType != tt.mime {
				t.Fatalf("media item %+v, want %s %s", ref.item, tt.mediaType, tt.mime)
			}
		})
	}

	t.Run("largest photo and links", func(t *testing.T) {
		text := "see https://a.example/x and docs and https://a.example/x"
		m := decode(t, srv.Message(1, text, w("entities", []map[string]any{
			{"type": "url", "offset": 4, "length": 19},
			{"type": "text_link", "offset": 28, "length": 4, "url": "https://docs.example/"},
			{"type": "url", "offset": 37, "length": 19},
		})))
		if got := m.links(); !slices.Equal(got, []string{"https://a.example/x", "https://docs.example/"}) {
			t.Fatalf("links %q", got)
		}
		photo := decode(t, srv.Message(1, "", w("photo", []any{file(map[string]any{"width": 90}), file(map[string]any{"file_id": "big", "width": 800, "file_size": 5})}),
			w("caption", "x https://c.example"), w("caption_entities", []map[string]any{{"type": "url", "offset": 2, "length": 17}})))
		p := newPayload(photo)
		content := marshal(p.Media)
		if content != `{"file_id":"big","file_size":5,"width":800,"mime_type":"image/jpeg"}` || !slices.Equal(p.Links, []string{"https://c.example"}) {
			t.Fatalf("media %s links %q", content, p.Links)
		}
	})
}

func TestPollingOffsets(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	rec := newRecorder()
	c := newChannel(t, srv, rec, nil)
	send(t, srv, 1, "sent while offline") // dropped at start, as Bub does
	startChannel(t, c)

	send(t, srv, 1, "one")
	if _, err := srv.PushUpdate("edited_message", srv.Message(1, "edited")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PushUpdate("message", "not a message"); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"two", "three", "four"} {
		send(t, srv, 1, text)
	}
	envs, err := rec.wait(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range envs {
		var p payload
		if err := json.Unmarshal([]byte(e.Content), &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Message)
	}
	if !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Fatalf("handled %q", got)
	}
	// The next poll confirms everything: nothing stays pending, offsets
	// only grow, and nothing was handled twice.
	if err := srv.Wait(ctx, func() bool { return srv.Pending() == 0 }); err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, call := range srv.Calls() {
		if call.Method == "getUpdates" {
			n, err := strconv.ParseInt(call.Param("offset"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			offsets = append(offsets, n)
		}
	}
	if !slices.IsSorted(offsets) || offsets[0] != 0 {
		t.Fatalf("offsets %v, want 0 then growing", offsets)
	}
	if got := srv.AllowedUpdates(); !slices.Equal(got, []string{"message"}) {
		t.Fatalf("allowed_updates %q", got)
	}
	if n := len(rec.all()); n != 4 {
		t.Fatalf("handler called %d times, want 4", n)
	}
	calls := srv.Calls()
	if calls[0].Method != "getMe" || calls[1].Method != "deleteWebhook" || calls[1].Param("drop_pending_updates") != "true" {
		t.Fatalf("first calls %+v %+v, want getMe then deleteWebhook(drop_pending_updates)", calls[0], calls[1])
	}
}

func TestHandlerRetried(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	rec := newRecorder()
	rec.fail = func(call int) error {
		if call == 0 {
			return errors.New("nats down")
		}
		return nil
	}
	startChannel(t, newChannel(t, srv, rec, nil))
	send(t, srv, 1, "keep me")
	if _, err := rec.wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

func TestStopEndsPollingPromptly(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	c := newChannel(t, srv, newRecorder(), func(cfg *Config) { cfg.PollTimeout = time.Minute })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until a long poll is in flight.
	if err := srv.Wait(ctx, func() bool {
		return slices.ContainsFunc(srv.Calls(), func(c telegramtest.Call) bool { return c.Method == "getUpdates" })
	}); err != nil {
		t.Fatal(err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Stop took %v", d)
	}
}

func TestStartErrors(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	c := newChannel(t, srv, newRecorder(), func(cfg *Config) { cfg.Token = "999:WRONG" })
	err := c.Start(ctx)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != http.StatusUnauthorized || strings.Contains(err.Error(), "WRONG") {
		t.Fatalf("Start = %v, want a 401 APIError without the token", err)
	}
	disabled, err := New(Config{}, newRecorder().handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	if disabled.Enabled() || disabled.Start(ctx) == nil {
		t.Fatal("a channel without a token must be disabled and refuse to start")
	}
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Fatal("New accepted a nil handler")
	}
}

func TestSendRetriesTooManyRequests(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	c := newChannel(t, srv, newRecorder(), nil) // Send works without Start

	srv.FailNext("sendMessage", telegramtest.Failure{Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: 1})
	if err := c.Send(ctx, &envelope.Envelope{Content: "after the wait", ChatID: "3"}); err != nil {
		t.Fatal(err)
	}
	if got := texts(srv.Sent()); !slices.Equal(got, []string{"after the wait"}) {
		t.Fatalf("sent %q", got)
	}

	srv.FailNext("sendMessage", telegramtest.Failure{Code: 429, Description: "Too Many Requests: retry after 3600", RetryAfter: 3600})
	err := c.Send(ctx, &envelope.Envelope{Content: "too long to wait", ChatID: "3"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != 429 || ae.RetryAfter != time.Hour {
		t.Fatalf("Send = %v, want the 429 APIError at once", err)
	}

	srv.FailNext("sendMessage", telegramtest.Failure{Code: 400, Description: "Bad Request: chat not found"})
	err = c.Send(ctx, &envelope.Envelope{Content: "x", ChatID: "3"})
	if !errors.As(err, &ae) || ae.Code != 400 || !strings.Contains(err.Error(), "chat 3") {
		t.Fatalf("Send = %v, want the wrapped 400", err)
	}
	if !errors.Is(err, channels.ErrUndeliverable) {
		t.Fatalf("Send = %v: a 400 is not undeliverable", err)
	}
	// Which answers retrying cannot fix: 400 and 403, not 429 or a 5xx.
	for code, want := range map[int]bool{400: true, 403: true, 429: false, 500: false, 502: false, 401: false} {
		if got := errors.Is(&APIError{Method: "sendMessage", Code: code}, channels.ErrUndeliverable); got != want {
			t.Errorf("%d undeliverable = %v, want %v", code, got, want)
		}
	}
	if err := c.Send(ctx, &envelope.Envelope{Content: "x"}); err == nil {
		t.Fatal("Send without chat_id succeeded")
	}
}

func TestSendSplitsLongText(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	c := newChannel(t, srv, newRecorder(), nil)
	line := strings.Repeat("word ", 99) + "end\n" // 499 bytes
	text := strings.Repeat(line, 20) + strings.Repeat("😀", 3000)
	if err := c.Send(ctx, &envelope.Envelope{Content: text, ChatID: "8"}); err != nil {
		t.Fatal(err)
	}
	sent := srv.Sent()
	if len(sent) < 3 {
		t.Fatalf("%d messages, want at least 3", len(sent))
	}
	if got := strings.Join(texts(sent), ""); got != text {
		t.Fatal("the chunks do not add up to the text")
	}
	if !strings.HasSuffix(sent[0].Text, "\n") {
		t.Fatalf("first chunk does not end at a line: %q", sent[0].Text[len(sent[0].Text)-20:])
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		text  string
		limit int
		want  []string
	}{
		{"", 5, nil},
		{"short", 5, []string{"short"}},
		{"aaaa bbbb", 5, []string{"aaaa ", "bbbb"}},
		{"ab\ncd ef", 6, []string{"ab\ncd ", "ef"}},
		{"abcd\nef gh", 8, []string{"abcd\n", "ef gh"}},
		{"abcdefgh", 3, []string{"abc", "def", "gh"}},
		{"😀😀😀", 4, []string{"😀😀", "😀"}},
		{"😀", 1, []string{"😀"}},
	}
	for _, tt := range tests {
		if got := split(tt.text, tt.limit); !slices.Equal(got, tt.want) {
			t.Errorf("split(%q, %d) = %q, want %q", tt.text, tt.limit, got, tt.want)
		}
	}
}

func TestTypingIndicator(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	rec := newRecorder()
	c := newChannel(t, srv, rec, nil)
	c.typingEvery = 10 * time.Millisecond
	startChannel(t, c)

	send(t, srv, -9, "just chatting", telegramtest.InChat("group")) // inactive: no typing
	send(t, srv, 4, "hello")
	if _, err := rec.wait(ctx, 2); err != nil {
		t.Fatal(err)
	}
	actions, err := srv.WaitActions(ctx, 3) // refreshed, not sent once
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		if a.ChatID != "4" || a.Action != "typing" {
			t.Fatalf("chat action %+v, want typing in chat 4", a)
		}
	}
	if c.typingLoopOf("-9") != nil {
		t.Fatal("an inactive message started a typing indicator")
	}
	// The first reply of a batch of two keeps typing, the last stops it.
	if err := c.Send(ctx, &envelope.Envelope{Content: "part 1", ChatID: "4", BatchIndex: 0, BatchSize: 2}); err != nil {
		t.Fatal(err)
	}
	loop := c.typingLoopOf("4")
	if loop == nil {
		t.Fatal("typing stopped before the last reply")
	}
	if err := c.Send(ctx, &envelope.Envelope{Content: "part 2", ChatID: "4", BatchIndex: 1, BatchSize: 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-loop.done:
	default:
		t.Fatal("typing loop still running after the reply")
	}
	if c.typingLoopOf("4") != nil {
		t.Fatal("typing loop still registered after the reply")
	}
}

func TestTypingIndicatorBounded(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	rec := newRecorder()
	c := newChannel(t, srv, rec, nil)
	c.typingEvery = 5 * time.Millisecond
	c.typingFor = 30 * time.Millisecond
	startChannel(t, c)
	send(t, srv, 4, "no reply will come")
	if _, err := srv.WaitActions(ctx, 1); err != nil {
		t.Fatal(err)
	}
	loop := c.typingLoopOf("4")
	if loop == nil {
		return // already ended by its bound
	}
	select {
	case <-loop.done:
	case <-ctx.Done():
		t.Fatal("typing loop outlived its bound")
	}
}

func TestMediaDownload(t *testing.T) {
	ctx := testCtx(t)
	_, srv, rec := running(t, nil)
	small := []byte("\x89PNG tiny image")
	smallID := srv.AddFile(small)
	doc := srv.AddFile([]byte("%PDF-1.7"))
	original := srv.Message(2, "", telegramtest.With("document", map[string]any{"file_id": doc, "file_name": "r.pdf", "mime_type": "application/pdf", "file_size": 8}))
	send(t, srv, 2, "", telegramtest.With("photo", []map[string]any{{"file_id": smallID, "width": 4, "height": 4, "file_size": len(small)}}), telegramtest.ReplyTo(original))
	send(t, srv, 2, "", telegramtest.With("voice", map[string]any{"file_id": "huge", "duration": 600, "file_size": MaxDownload + 1}))
	envs, err := rec.wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []envelope.Media{
		{Type: "image", MimeType: "image/jpeg", URL: "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(small)},
		{Type: "document", MimeType: "application/pdf", Filename: "r.pdf", URL: "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.7"))},
	}
	if !slices.Equal(envs[0].Media, want) {
		t.Fatalf("media %+v, want %+v", envs[0].Media, want)
	}
	if len(envs[1].Media) != 0 || !strings.Contains(envs[1].Content, `"file_id":"huge"`) {
		t.Fatalf("a file over the limit: media %+v content %s", envs[1].Media, envs[1].Content)
	}
	for _, call := range srv.Calls() {
		if call.Method == "getFile" && call.Param("file_id") == "huge" {
			t.Fatal("a file over the limit was looked up")
		}
	}
}

func TestProxy(t *testing.T) {
	ctx := testCtx(t)
	srv := telegramtest.NewServer(t)
	var proxied atomic.Int32
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	c := newChannel(t, srv, newRecorder(), func(cfg *Config) { cfg.Proxy = proxy.URL })
	if err := c.Send(ctx, &envelope.Envelope{Content: "via proxy", ChatID: "1"}); err != nil {
		t.Fatal(err)
	}
	if proxied.Load() != 1 || len(srv.Sent()) != 1 {
		t.Fatalf("proxied %d requests, sent %d", proxied.Load(), len(srv.Sent()))
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := ConfigFromEnv(env(map[string]string{
		EnvToken:       " 1:abc ",
		EnvAllowUsers:  "42, grace,,",
		EnvAllowChats:  "-100",
		EnvPollTimeout: "10",
		EnvAPIBase:     "http://127.0.0.1:1/",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "1:abc" || !slices.Equal(c.AllowUsers, []string{"42", "grace"}) || !slices.Equal(c.AllowChats, []string{"-100"}) ||
		c.PollTimeout != 10*time.Second || c.apiBase() != "http://127.0.0.1:1" || !c.Enabled() {
		t.Fatalf("config %+v", c)
	}
	zero, err := ConfigFromEnv(env(nil))
	if err != nil || zero.Enabled() || zero.apiBase() != DefaultAPIBase || zero.pollTimeout() != DefaultPollTimeout {
		t.Fatalf("defaults %+v, %v", zero, err)
	}
	for name, kv := range map[string]map[string]string{
		"duration":   {EnvPollTimeout: "soon"},
		"fraction":   {EnvPollTimeout: "1.5s"},
		"api base":   {EnvAPIBase: "ftp://x"},
		"proxy":      {EnvProxy: "::"},
		"token path": {EnvToken: "1:a/b"},
	} {
		if _, err := ConfigFromEnv(env(kv)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A server that answers an update again (below the offset) must not get
// it handled twice, nor make the loop spin.
func TestRepeatedUpdateHandledOnce(t *testing.T) {
	ctx := testCtx(t)
	polls := make(chan string, 100)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/getMe"):
			_, _ = w.Write([]byte(`{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"B","username":"b_bot"}}`))
		case strings.HasSuffix(r.URL.Path, "/getUpdates"):
			var p struct {
				Offset int64 `json:"offset"`
			}
			_ = json.NewDecoder(r.Body).Decode(&p)
			polls <- strconv.FormatInt(p.Offset, 10)
			_, _ = w.Write([]byte(`{"ok":true,"result":[{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":3,"type":"private"},"from":{"id":2,"first_name":"U"},"text":"once"}}]}`))
		default:
			_, _ = w.Write([]byte(`{"ok":true,"result":true}`))
		}
	}))
	t.Cleanup(api.Close)
	rec := newRecorder()
	c, err := New(Config{Token: "1:x", APIBase: api.URL}, rec.handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	startChannel(t, c)
	var offsets []string
	for len(offsets) < 3 {
		select {
		case o := <-polls:
			offsets = append(offsets, o)
		case <-ctx.Done():
			t.Fatalf("polls %v", offsets)
		}
	}
	if !slices.Equal(offsets, []string{"0", "6", "6"}) || len(rec.all()) != 1 {
		t.Fatalf("offsets %v, handled %d times", offsets, len(rec.all()))
	}
}
