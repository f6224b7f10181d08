package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bubbus/bub/pkg/llm"
)

// Request is one chat-completion request the server received.
type Request struct {
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Fields is the decoded body (nil when it was not a JSON object).
	Fields   map[string]any
	Model    string
	Messages []llm.Message
	Stream   bool
}

// LastUserText returns the plain text of the last user message, "" when
// there is none.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == llm.RoleUser {
			return r.Messages[i].Content.PlainText()
		}
	}
	return ""
}

// chatBody is the part of a request body the server reads.
type chatBody struct {
	Model         string        `json:"model"`
	Messages      []llm.Message `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// Server is a fake OpenAI-compatible API: POST /v1/chat/completions
// (streaming and not) answered from a [Script], and GET /v1/models. It
// records every chat request. It is an [http.Handler]; use [Start] in
// tests. It is safe for concurrent use.
type Server struct {
	apiKey string
	models []string

	// mu guards the fields below.
	mu       sync.Mutex
	steps    []Step
	requests []Request
	// changed is closed and replaced whenever a request is recorded.
	changed chan struct{}
	// completions and toolCalls number response ids and default call ids.
	completions int
	toolCalls   int
	// inFlight counts the chat requests being answered.
	inFlight int
}

// New returns a server that answers from script. Invalid steps are
// answered with HTTP 500 naming the problem (see [Script.Validate]).
func New(script Script) *Server {
	models := script.Models
	if len(models) == 0 {
		models = []string{"fake"}
	}
	return &Server{
		apiKey:  script.APIKey,
		models:  models,
		steps:   append([]Step(nil), script.Steps...),
		changed: make(chan struct{}),
	}
}

// Enqueue appends steps to the pending ones.
func (s *Server) Enqueue(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Pending returns how many steps are not consumed yet (repeating steps
// count).
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Requests returns the chat requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// InFlight returns how many chat requests are being answered now
// (received, response not yet complete).
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// WaitRequests waits until at least n chat requests were received and
// returns them, or returns ctx's error.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		reqs, changed := s.requests, s.changed
		s.mu.Unlock()
		if len(reqs) >= n {
			return append([]Request(nil), reqs...), nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("fakellm: waiting for %d requests, got %d: %w", n, len(reqs), ctx.Err())
		}
	}
}

// ServeHTTP routes /v1/chat/completions and /v1/models.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		if s.authorized(w, r) {
			s.serveModels(w)
		}
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.serveChat(w, r)
	default:
		writeError(w, Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), Type: "invalid_request_error"})
	}
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.apiKey == "" || r.Header.Get("Authorization") == "Bearer "+s.apiKey {
		return true
	}
	writeError(w, Error{Status: http.StatusUnauthorized, Message: "Incorrect API key provided", Type: "invalid_request_error", Code: "invalid_api_key"})
	return false
}

func (s *Server) serveModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, id := range s.models {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "fakellm"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, Error{Status: http.StatusBadRequest, Message: "reading body: " + err.Error(), Type: "invalid_request_error"})
		return
	}
	var body chatBody
	bodyErr := json.Unmarshal(raw, &body)
	req := Request{Header: r.Header.Clone(), Body: raw, Model: body.Model, Messages: body.Messages, Stream: body.Stream}
	if json.Unmarshal(raw, &req.Fields) != nil {
		req.Fields = nil
	}
	s.record(req)
	s.mu.Lock()
	s.inFlight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if !s.authorized(w, r) {
		return
	}
	if bodyErr != nil {
		writeError(w, Error{Status: http.StatusBadRequest, Message: "invalid JSON body: " + bodyErr.Error(), Type: "invalid_request_error"})
		return
	}
	step, id := s.next(req.LastUserText())
	if err := step.Validate(); err != nil {
		writeError(w, Error{Status: http.StatusInternalServerError, Message: "fakellm: invalid step: " + err.Error(), Type: "server_error"})
		return
	}
	if !wait(r.Context(), time.Duration(step.Delay)) {
		return
	}
	if step.Error != nil {
		writeError(w, *step.Error)
		return
	}
	a := s.answer(step, req, id)
	if !body.Stream {
		if len(step.Raw) > 0 {
			writeError(w, Error{Status: http.StatusBadRequest, Message: "fakellm: raw_chunks need stream=true", Type: "invalid_request_error"})
			return
		}
		writeJSON(w, http.StatusOK, a.completion())
		return
	}
	chunks := step.Raw
	if len(chunks) == 0 {
		chunks = a.chunks(body.StreamOptions.IncludeUsage)
	}
	streamSSE(r.Context(), w, chunks, time.Duration(step.ChunkDelay), step.StreamError)
}

// record stores req and wakes WaitRequests.
func (s *Server) record(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	close(s.changed)
	s.changed = make(chan struct{})
}

// next picks the step for a request whose last user message is last (echo
// when none matches) and numbers the completion.
func (s *Server) next(last string) (Step, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completions++
	for i, st := range s.steps {
		if st.Match != "" && !strings.Contains(last, st.Match) {
			continue
		}
		if !st.Repeat {
			s.steps = append(s.steps[:i:i], s.steps[i+1:]...)
		}
		return st, s.completions
	}
	return Step{Echo: true}, s.completions
}

// answer resolves a content step into its parts for request req.
func (s *Server) answer(st Step, req Request, id int) answer {
	a := answer{
		id:        fmt.Sprintf("chatcmpl-fake-%d", id),
		model:     req.Model,
		text:      st.Text,
		reasoning: st.Reasoning,
		pieces:    st.Chunks,
	}
	if a.pieces == 0 {
		a.pieces = defaultChunks
	}
	if st.Echo {
		a.text = req.LastUserText()
	}
	s.mu.Lock()
	for _, tc := range st.ToolCalls {
		s.toolCalls++
		callID := tc.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%d", s.toolCalls)
		}
		args, _ := argumentText(tc.Arguments) // validated
		a.calls = append(a.calls, llm.ToolCall{ID: callID, Type: "function", Function: llm.FunctionCall{Name: tc.Name, Arguments: args}})
	}
	s.mu.Unlock()
	if st.Usage != nil {
		a.usage = *st.Usage
	} else {
		a.usage = estimateUsage(req.Messages, a)
	}
	return a
}

// estimateUsage counts words: over every message for the prompt, over
// the reasoning, text and tool-call arguments for the completion.
func estimateUsage(msgs []llm.Message, a answer) Usage {
	var u Usage
	for _, m := range msgs {
		u.PromptTokens += len(strings.Fields(m.Content.PlainText()))
	}
	u.CompletionTokens = len(strings.Fields(a.reasoning)) + len(strings.Fields(a.text))
	for _, c := range a.calls {
		u.CompletionTokens += 1 + len(strings.Fields(c.Function.Arguments))
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// wait waits d or until ctx is done, reporting whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e Error) {
	writeJSON(w, e.Status, map[string]any{"error": errorObject(e.Message, e.Type, e.Code)})
}

// errorObject is the OpenAI error object.
func errorObject(message, typ, code string) map[string]any {
	obj := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
	if code != "" {
		obj["code"] = code
	}
	return obj
}
