package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

// DefaultToken is the bot token a [Server] accepts unless [WithToken]
// says otherwise.
const DefaultToken = "123456:TEST-TOKEN"

// MaxMessageLength is the longest text sendMessage accepts, in UTF-16
// code units as Telegram counts them.
const MaxMessageLength = 4096

// User is a Telegram user (the fields a bot channel reads).
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

// DefaultBot is the bot getMe describes unless [WithBot] says otherwise.
var DefaultBot = User{ID: 7000, IsBot: true, FirstName: "Assistant", Username: "helper_bot"}

// DefaultUser is the sender of [Server.SendUserMessage] unless [From] says
// otherwise.
var DefaultUser = User{ID: 42, FirstName: "Ada", LastName: "Lovelace", Username: "ada"}

// Call is one recorded API call.
type Call struct {
	Method string
	// Params are the call's parameters as JSON values (a form or query
	// value is a JSON string).
	Params map[string]json.RawMessage
}

// Param returns the parameter as a string: a JSON string unquoted, any
// other JSON value as written, "" when absent.
func (c Call) Param(name string) string {
	raw, ok := c.Params[name]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// SentMessage is one accepted sendMessage call.
type SentMessage struct {
	ChatID    string
	Text      string
	MessageID int64
}

// ChatAction is one accepted sendChatAction call.
type ChatAction struct {
	ChatID string
	Action string
}

// Failure is an error the server answers instead of running a method.
type Failure struct {
	Code        int
	Description string
	// RetryAfter, when positive, becomes parameters.retry_after (seconds).
	RetryAfter int
}

// Option configures a [Server].
type Option func(*Server)

// WithToken sets the bot token the server accepts.
func WithToken(token string) Option { return func(s *Server) { s.token = token } }

// WithBot sets the bot getMe describes.
func WithBot(bot User) Option { return func(s *Server) { s.bot = bot } }

// Server is a fake Bot API server. Its methods are safe for concurrent
// use.
type Server struct {
	srv     *httptest.Server
	token   string
	bot     User
	closing chan struct{}
	once    sync.Once

	mu sync.Mutex
	// changed is closed and replaced whenever anything below changes.
	changed  chan struct{}
	updates  []json.RawMessage // pending, in update_id order
	ids      []int64           // update_id of each pending update
	nextID   int64
	nextMsg  int64
	allowed  []string // the last allowed_updates a getUpdates gave
	calls    []Call
	sent     []SentMessage
	actions  []ChatAction
	failures map[string][]Failure
	files    map[string][]byte
}

// NewServer starts a server that is closed when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	t.Cleanup(s.Close)
	return s
}

// New starts a server on a random 127.0.0.1 port; the caller closes it.
func New(opts ...Option) *Server {
	s := newServer(opts...)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Listen starts a server on addr (e.g. "127.0.0.1:8081") for tests that
// run binaries; the caller closes it. Besides the Bot API it serves the
// control endpoints of [Server.ServeControl] under /_fake/.
func Listen(addr string, opts ...Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telegramtest: %w", err)
	}
	s := newServer(opts...)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	return s, nil
}

func newServer(opts ...Option) *Server {
	s := &Server{
		token:    DefaultToken,
		bot:      DefaultBot,
		closing:  make(chan struct{}),
		changed:  make(chan struct{}),
		nextID:   1,
		nextMsg:  1,
		failures: map[string][]Failure{},
		files:    map[string][]byte{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Close ends every waiting long poll and shuts the server down.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closing) })
	s.srv.Close()
}

// URL is the API base to configure a bot with (no trailing slash).
func (s *Server) URL() string { return s.srv.URL }

// Token is the bot token the server accepts.
func (s *Server) Token() string { return s.token }

// Bot is the bot getMe describes.
func (s *Server) Bot() User { return s.bot }

// notifyLocked wakes every waiter; s.mu is held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// MessageOption shapes a message [Server.SendUserMessage] injects.
type MessageOption func(msg map[string]any)

// From sets the sender.
func From(u User) MessageOption { return func(m map[string]any) { m["from"] = u } }

// InChat sets the chat's type ("private", "group", "supergroup",
// "channel").
func InChat(chatType string) MessageOption {
	return func(m map[string]any) {
		chat, _ := m["chat"].(map[string]any)
		if chat == nil {
			chat = map[string]any{}
			m["chat"] = chat
		}
		chat["type"] = chatType
	}
}

// ReplyTo makes the message a reply to msg (a message as [Server.Message]
// or a test builds it).
func ReplyTo(msg map[string]any) MessageOption {
	return func(m map[string]any) { m["reply_to_message"] = msg }
}

// With sets any field of the message, e.g. With("photo", ...),
// With("entities", ...), With("caption", "..."), With("text", nil) to
// remove the text.
func With(field string, value any) MessageOption {
	return func(m map[string]any) {
		if value == nil {
			delete(m, field)
			return
		}
		m[field] = value
	}
}

// Message builds a message as the server would deliver it, without
// queueing it: a text message in the private chat chatID from
// [DefaultUser], with a bot_command entity when text starts with "/" (as
// Telegram adds), shaped by opts. An empty text leaves the field out.
func (s *Server) Message(chatID int64, text string, opts ...MessageOption) map[string]any {
	s.mu.Lock()
	id := s.nextMsg
	s.nextMsg++
	s.mu.Unlock()
	m := map[string]any{
		"message_id": id,
		"date":       time.Now().Unix(),
		"chat":       map[string]any{"id": chatID, "type": "private"},
		"from":       DefaultUser,
	}
	if text != "" {
		m["text"] = text
		if strings.HasPrefix(text, "/") {
			word, _, _ := strings.Cut(text, " ")
			m["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(utf16.Encode([]rune(word)))}}
		}
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// SendUserMessage queues a "message" update carrying [Server.Message] and
// returns the message. It fails only when a value given by [With] does not
// encode as JSON.
func (s *Server) SendUserMessage(chatID int64, text string, opts ...MessageOption) (map[string]any, error) {
	m := s.Message(chatID, text, opts...)
	if _, err := s.PushUpdate("message", m); err != nil {
		return nil, err
	}
	return m, nil
}

// PushUpdate queues an update whose only field besides update_id is kind
// (e.g. "message", "edited_message") holding payload, and returns its
// update_id. It fails when payload does not encode as JSON.
func (s *Server) PushUpdate(kind string, payload any) (int64, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("encoding %s: %w", kind, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	raw, err := json.Marshal(map[string]json.RawMessage{
		"update_id": json.RawMessage(strconv.FormatInt(id, 10)),
		kind:        body,
	})
	if err != nil {
		return 0, fmt.Errorf("encoding update: %w", err)
	}
	s.updates = append(s.updates, raw)
	s.ids = append(s.ids, id)
	s.notifyLocked()
	return id, nil
}

// Pending is the number of updates not yet confirmed by an offset.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// AllowedUpdates is the allowed_updates list the last getUpdates gave.
func (s *Server) AllowedUpdates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.allowed...)
}

// AddFile stores content for getFile and returns its file_id.
func (s *Server) AddFile(content []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "file-" + strconv.Itoa(len(s.files)+1)
	s.files[id] = append([]byte(nil), content...)
	return id
}

// FailNext makes the next call of method answer f instead; several
// failures queue up in order.
func (s *Server) FailNext(method string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f)
}

// Calls returns every API call so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Sent returns every accepted sendMessage call.
func (s *Server) Sent() []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentMessage(nil), s.sent...)
}

// Actions returns every accepted sendChatAction call.
func (s *Server) Actions() []ChatAction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatAction(nil), s.actions...)
}

// Wait blocks until cond, evaluated after every change of the server's
// state (and once at first), reports true, or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("telegramtest: waiting: %w", ctx.Err())
		}
	}
}

// WaitSent waits until at least n messages were sent and returns them.
func (s *Server) WaitSent(ctx context.Context, n int) ([]SentMessage, error) {
	var out []SentMessage
	err := s.Wait(ctx, func() bool { out = s.Sent(); return len(out) >= n })
	return out, err
}

// WaitActions waits until at least n chat actions were sent and returns
// them.
func (s *Server) WaitActions(ctx context.Context, n int) ([]ChatAction, error) {
	var out []ChatAction
	err := s.Wait(ctx, func() bool { out = s.Actions(); return len(out) >= n })
	return out, err
}

// apiError is a Bot API error answer.
type apiError struct {
	code        int
	description string
	retryAfter  int
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_fake/") {
		s.ServeControl(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, r, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, found := strings.Cut(rest, "/")
	if !ok || !found || method == "" {
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	if token != s.token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	params, err := readParams(r)
	if err != nil {
		writeError(w, apiError{400, "Bad Request: " + err.Error(), 0})
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: params})
	var fail *Failure
	if q := s.failures[method]; len(q) > 0 {
		fail = &q[0]
		s.failures[method] = q[1:]
	}
	s.notifyLocked()
	s.mu.Unlock()
	if fail != nil {
		writeError(w, apiError{fail.Code, fail.Description, fail.RetryAfter})
		return
	}
	var result any
	var aerr *apiError
	switch method {
	case "getMe":
		result = s.bot
	case "deleteWebhook":
		result, aerr = s.deleteWebhook(params)
	case "getUpdates":
		result, aerr = s.getUpdates(r.Context(), params)
	case "sendMessage":
		result, aerr = s.sendMessage(params)
	case "sendChatAction":
		result, aerr = s.sendChatAction(params)
	case "getFile":
		result, aerr = s.getFile(params)
	default:
		aerr = &apiError{404, "Not Found: method not found", 0}
	}
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

// readParams reads a call's parameters from a JSON body, a form body or
// the query string, as the real API accepts them.
func readParams(r *http.Request) (map[string]json.RawMessage, error) {
	params := map[string]json.RawMessage{}
	for k, v := range r.URL.Query() {
		params[k] = quote(v[0])
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, fmt.Errorf("can't parse JSON body: %w", err)
		}
		for k, v := range obj {
			params[k] = v
		}
	case "application/x-www-form-urlencoded", "multipart/form-data":
		if err := r.ParseMultipartForm(1 << 20); err != nil && err != http.ErrNotMultipart {
			return nil, err
		}
		for k, v := range r.PostForm {
			params[k] = quote(v[0])
		}
	}
	return params, nil
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

// intParam reads an integer parameter given as a JSON number or string.
func intParam(params map[string]json.RawMessage, name string) (int64, bool, error) {
	raw, ok := params[name]
	if !ok {
		return 0, false, nil
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n, true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true, nil
		}
	}
	return 0, true, fmt.Errorf("parameter %q must be an integer", name)
}

// chatParam reads chat_id given as a number or a string.
func chatParam(params map[string]json.RawMessage) (string, *apiError) {
	raw, ok := params["chat_id"]
	if !ok {
		return "", &apiError{400, "Bad Request: chat_id is empty", 0}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return "", &apiError{400, "Bad Request: chat_id is empty", 0}
		}
		return s, nil
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return "", &apiError{400, "Bad Request: chat not found", 0}
	}
	return strconv.FormatInt(n, 10), nil
}

func (s *Server) deleteWebhook(params map[string]json.RawMessage) (any, *apiError) {
	var drop bool
	if raw, ok := params["drop_pending_updates"]; ok {
		var str string
		if json.Unmarshal(raw, &drop) != nil && json.Unmarshal(raw, &str) == nil {
			drop = str == "true"
		}
	}
	if drop {
		s.mu.Lock()
		s.updates, s.ids = nil, nil
		s.notifyLocked()
		s.mu.Unlock()
	}
	return true, nil
}

// getUpdates answers pending updates from offset on, waiting up to
// timeout seconds for one to arrive.
func (s *Server) getUpdates(ctx context.Context, params map[string]json.RawMessage) (any, *apiError) {
	offset, _, err := intParam(params, "offset")
	if err != nil {
		return nil, &apiError{400, "Bad Request: " + err.Error(), 0}
	}
	timeout, _, err := intParam(params, "timeout")
	if err != nil {
		return nil, &apiError{400, "Bad Request: " + err.Error(), 0}
	}
	limit, hasLimit, err := intParam(params, "limit")
	if err != nil {
		return nil, &apiError{400, "Bad Request: " + err.Error(), 0}
	}
	if !hasLimit || limit <= 0 || limit > 100 {
		limit = 100
	}
	if raw, ok := params["allowed_updates"]; ok {
		var allowed []string
		var str string
		if json.Unmarshal(raw, &allowed) != nil {
			if json.Unmarshal(raw, &str) != nil || json.Unmarshal([]byte(str), &allowed) != nil {
				return nil, &apiError{400, "Bad Request: can't parse allowed_updates", 0}
			}
		}
		s.mu.Lock()
		s.allowed = allowed
		s.mu.Unlock()
	}
	deadline := time.NewTimer(time.Duration(max(timeout, 0)) * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		s.confirmLocked(offset)
		out := s.matchingLocked(limit)
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			timeout = 0
		case <-ctx.Done():
			return nil, &apiError{499, "Client closed request", 0}
		case <-s.closing:
			timeout = 0
		}
	}
}

// confirmLocked forgets the updates an offset confirms: every update
// below a positive offset, every update but the last -offset ones for a
// negative one.
func (s *Server) confirmLocked(offset int64) {
	n := 0
	switch {
	case offset > 0:
		for n < len(s.ids) && s.ids[n] < offset {
			n++
		}
	case offset < 0:
		n = max(len(s.ids)+int(offset), 0)
	}
	if n > 0 {
		s.updates, s.ids = s.updates[n:], s.ids[n:]
		s.notifyLocked()
	}
}

// matchingLocked returns up to limit pending updates of an allowed kind.
func (s *Server) matchingLocked(limit int64) []json.RawMessage {
	out := []json.RawMessage{} // the API answers [], never null
	for _, u := range s.updates {
		if int64(len(out)) == limit {
			break
		}
		if s.allowedLocked(u) {
			out = append(out, u)
		}
	}
	return out
}

func (s *Server) allowedLocked(update json.RawMessage) bool {
	if len(s.allowed) == 0 {
		return true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(update, &fields) != nil {
		return false
	}
	for _, kind := range s.allowed {
		if _, ok := fields[kind]; ok {
			return true
		}
	}
	return false
}

func (s *Server) sendMessage(params map[string]json.RawMessage) (any, *apiError) {
	chatID, aerr := chatParam(params)
	if aerr != nil {
		return nil, aerr
	}
	var text string
	if raw, ok := params["text"]; ok && json.Unmarshal(raw, &text) != nil {
		return nil, &apiError{400, "Bad Request: text must be a string", 0}
	}
	if strings.TrimSpace(text) == "" {
		return nil, &apiError{400, "Bad Request: message text is empty", 0}
	}
	if len(utf16.Encode([]rune(text))) > MaxMessageLength {
		return nil, &apiError{400, "Bad Request: message is too long", 0}
	}
	s.mu.Lock()
	id := s.nextMsg
	s.nextMsg++
	s.sent = append(s.sent, SentMessage{ChatID: chatID, Text: text, MessageID: id})
	s.notifyLocked()
	s.mu.Unlock()
	chat, _ := strconv.ParseInt(chatID, 10, 64)
	return map[string]any{
		"message_id": id,
		"date":       time.Now().Unix(),
		"chat":       map[string]any{"id": chat, "type": "private"},
		"from":       s.bot,
		"text":       text,
	}, nil
}

func (s *Server) sendChatAction(params map[string]json.RawMessage) (any, *apiError) {
	chatID, aerr := chatParam(params)
	if aerr != nil {
		return nil, aerr
	}
	var action string
	if raw, ok := params["action"]; !ok || json.Unmarshal(raw, &action) != nil || action == "" {
		return nil, &apiError{400, "Bad Request: action is empty", 0}
	}
	s.mu.Lock()
	s.actions = append(s.actions, ChatAction{ChatID: chatID, Action: action})
	s.notifyLocked()
	s.mu.Unlock()
	return true, nil
}

func (s *Server) getFile(params map[string]json.RawMessage) (any, *apiError) {
	var id string
	if raw, ok := params["file_id"]; !ok || json.Unmarshal(raw, &id) != nil {
		return nil, &apiError{400, "Bad Request: file_id is empty", 0}
	}
	s.mu.Lock()
	content, ok := s.files[id]
	s.mu.Unlock()
	if !ok {
		return nil, &apiError{400, "Bad Request: invalid file_id", 0}
	}
	return map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": len(content), "file_path": "documents/" + id}, nil
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, path, _ := strings.Cut(rest, "/")
	id, ok := strings.CutPrefix(path, "documents/")
	s.mu.Lock()
	content, found := s.files[id]
	s.mu.Unlock()
	if token != s.token || !ok || !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(content)
}

func writeError(w http.ResponseWriter, e apiError) {
	body := map[string]any{"ok": false, "error_code": e.code, "description": e.description}
	if e.retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": e.retryAfter}
	}
	status := e.code
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client may be gone; nothing to do then
}

// ServeControl serves the endpoints a test in another process drives the
// fake with (every server answers them under /_fake/):
//
//   - POST /_fake/message {"chat_id": 1, "text": "hi"} queues a user
//     message as [Server.SendUserMessage] does and answers it.
//   - GET /_fake/sent answers every sendMessage call so far
//     ([Server.Sent]) as [{"chat_id", "text", "message_id"}].
func (s *Server) ServeControl(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_fake/message" && r.Method == http.MethodPost:
		var in struct {
			ChatID int64  `json:"chat_id"`
			Text   string `json:"text"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Text == "" {
			http.Error(w, "want {\"chat_id\": <int>, \"text\": <non-empty string>}", http.StatusBadRequest)
			return
		}
		m, err := s.SendUserMessage(in.ChatID, in.Text)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, m)
	case r.URL.Path == "/_fake/sent" && r.Method == http.MethodGet:
		type sent struct {
			ChatID    string `json:"chat_id"`
			Text      string `json:"text"`
			MessageID int64  `json:"message_id"`
		}
		out := []sent{}
		for _, m := range s.Sent() {
			out = append(out, sent{m.ChatID, m.Text, m.MessageID})
		}
		writeJSON(w, http.StatusOK, out)
	default:
		http.NotFound(w, r)
	}
}
