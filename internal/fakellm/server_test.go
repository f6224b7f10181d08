package fakellm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/openai"
)

// post sends a chat request for prompt and returns the status and either
// the decoded JSON body (stream=false) or the SSE data payloads.
func post(t *testing.T, base, prompt string, stream, includeUsage bool, header http.Header) (int, map[string]any, []string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model":          "fake",
		"messages":       []llm.Message{{Role: llm.RoleUser, Content: llm.Text(prompt)}},
		"stream":         stream,
		"stream_options": map[string]any{"include_usage": includeUsage},
	})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	if !stream || resp.StatusCode != http.StatusOK {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("decoding body: %v", err)
		}
		return resp.StatusCode, m, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	return resp.StatusCode, nil, events
}

// complete runs the real OpenAI-compatible provider against base.
func complete(t *testing.T, base, prompt string) llm.Response {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL(base), openai.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Complete(t.Context(), llm.Call{Model: "fake", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(prompt)}}}, nil)
	if err != nil {
		t.Fatalf("Complete(%q): %v", prompt, err)
	}
	return resp
}

func TestStepSelection(t *testing.T) {
	script := fakellm.Script{Steps: []fakellm.Step{
		{Match: "weather", Text: "sunny"},
		{Text: "first generic"},
		{Match: "ping", Repeat: true, Text: "pong"},
		{Text: "second generic"},
	}}
	fake, base := fakellm.Start(t, script)
	tests := []struct{ prompt, want string }{
		{"hello", "first generic"},         // the weather step does not match
		{"ping", "pong"},                   // repeat
		{"what weather today", "sunny"},    // matched out of order
		{"ping again", "pong"},             // still there
		{"hello", "second generic"},        // next unconsumed
		{"ping", "pong"},                   // repeating steps stay
		{"anything else", "anything else"}, // nothing matches: echo
	}
	for _, tt := range tests {
		if got := complete(t, base, tt.prompt).Text; got != tt.want {
			t.Errorf("%q answered %q, want %q", tt.prompt, got, tt.want)
		}
	}
	if got := fake.Pending(); got != 1 {
		t.Errorf("Pending = %d, want 1 (the repeating step)", got)
	}
	reqs := fake.Requests()
	if len(reqs) != len(tests) || reqs[2].LastUserText() != "what weather today" || reqs[0].Model != "fake" || !reqs[0].Stream {
		t.Errorf("recorded %d requests, first %+v", len(reqs), reqs[0])
	}
}

func TestEmptyScriptEchoes(t *testing.T) {
	_, base := fakellm.Start(t, fakellm.Script{})
	if got := complete(t, base, "echo me, exactly").Text; got != "echo me, exactly" {
		t.Fatalf("echo = %q", got)
	}
}

func TestNonStreaming(t *testing.T) {
	_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{
		Reasoning: "hmm", Text: "calling",
		ToolCalls: []fakellm.ToolCall{{Name: "bash", Arguments: json.RawMessage(`{"cmd": "ls"}`)}},
		Usage:     &fakellm.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7, CachedTokens: 1},
	}}})
	status, body, _ := post(t, base, "hi", false, false, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, body)
	}
	choice := body["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	wantCalls := []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"cmd":"ls"}`}}}
	if msg["content"] != "calling" || msg["reasoning_content"] != "hmm" || !reflect.DeepEqual(msg["tool_calls"], wantCalls) || choice["finish_reason"] != "tool_calls" {
		t.Errorf("message = %v, finish %v", msg, choice["finish_reason"])
	}
	wantUsage := map[string]any{"prompt_tokens": 5.0, "completion_tokens": 2.0, "total_tokens": 7.0, "prompt_tokens_details": map[string]any{"cached_tokens": 1.0}}
	if !reflect.DeepEqual(body["usage"], wantUsage) || body["object"] != "chat.completion" {
		t.Errorf("usage = %v, object %v", body["usage"], body["object"])
	}
}

func TestStreamShape(t *testing.T) {
	tests := []struct {
		name         string
		step         fakellm.Step
		includeUsage bool
		wantEvents   int
		wantLast     string
	}{
		// two text chunks (the first with the role), the finish chunk.
		{name: "no usage", step: fakellm.Step{Text: "ab", Chunks: 2}, wantEvents: 4, wantLast: "[DONE]"},
		{name: "usage chunk", step: fakellm.Step{Text: "ab", Chunks: 2}, includeUsage: true, wantEvents: 5, wantLast: "[DONE]"},
		{name: "stream error", step: fakellm.Step{Text: "ab", Chunks: 1, StreamError: "gone"}, wantEvents: 3, wantLast: `{"error":{"code":null,"message":"gone","param":null,"type":"server_error"}}`},
		{name: "raw chunks compacted", step: fakellm.Step{Raw: []json.RawMessage{json.RawMessage("{\n  \"x\": 1\n}")}}, wantEvents: 2, wantLast: "[DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{tt.step}})
			_, _, events := post(t, base, "hi", true, tt.includeUsage, nil)
			if len(events) != tt.wantEvents || events[len(events)-1] != tt.wantLast {
				t.Fatalf("events = %q, want %d ending in %q", events, tt.wantEvents, tt.wantLast)
			}
			if tt.includeUsage && !strings.Contains(events[len(events)-2], `"usage":{`) {
				t.Errorf("no usage chunk before [DONE]: %q", events)
			}
		})
	}
}

func TestErrorsAndRoutes(t *testing.T) {
	fake, base := fakellm.Start(t, fakellm.Script{APIKey: "sk-x", Models: []string{"a", "b"}, Steps: []fakellm.Step{
		{Error: &fakellm.Error{Status: 400, Message: "too long", Code: "context_length_exceeded"}},
		{Raw: []json.RawMessage{json.RawMessage(`{}`)}},
	}})
	auth := http.Header{"Authorization": {"Bearer sk-x"}}

	if status, body, _ := post(t, base, "hi", true, false, nil); status != http.StatusUnauthorized || fake.Pending() != 2 {
		t.Errorf("no key: status %d %v, pending %d; want 401 and no step consumed", status, body, fake.Pending())
	}
	status, body, _ := post(t, base, "hi", true, false, auth)
	if errObj, _ := body["error"].(map[string]any); status != 400 || errObj["message"] != "too long" || errObj["code"] != "context_length_exceeded" {
		t.Errorf("scripted error: status %d body %v", status, body)
	}
	if status, body, _ := post(t, base, "hi", false, false, auth); status != http.StatusBadRequest || !strings.Contains(body["error"].(map[string]any)["message"].(string), "raw_chunks") {
		t.Errorf("raw chunks without stream: status %d body %v", status, body)
	}
	fake.Enqueue(fakellm.Step{Echo: true, Text: "both"})
	if status, body, _ := post(t, base, "hi", false, false, auth); status != http.StatusInternalServerError {
		t.Errorf("invalid enqueued step: status %d body %v", status, body)
	}

	get := func(path string, header http.Header) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if status, m := get("/models", auth); status != 200 || len(m["data"].([]any)) != 2 {
		t.Errorf("models: %d %v", status, m)
	}
	if status, _ := get("/models", nil); status != http.StatusUnauthorized {
		t.Errorf("models without key: %d", status)
	}
	if status, _ := get("/nope", auth); status != http.StatusNotFound {
		t.Errorf("unknown route: %d", status)
	}
	if got := len(fake.Requests()); got != 4 {
		t.Errorf("recorded %d chat requests, want 4 (every POST, authorized or not)", got)
	}
}

func TestWaitRequestsAndDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Text: "late", Delay: fakellm.Duration(delay)}}})

	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if _, err := fake.WaitRequests(ctx, 1); err == nil {
		t.Fatal("WaitRequests returned before any request")
	}

	p, err := openai.New(openai.WithBaseURL(base), openai.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		resp, err := p.Complete(t.Context(), llm.Call{Model: "fake"}, nil)
		done <- result{resp.Text, err}
	}()
	if reqs, err := fake.WaitRequests(t.Context(), 1); err != nil || len(reqs) != 1 {
		t.Fatalf("WaitRequests = %d, %v", len(reqs), err)
	}
	if r := <-done; r.err != nil || r.text != "late" {
		t.Fatalf("answer = %q, %v", r.text, r.err)
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Errorf("answered after %s, before the %s delay", elapsed, delay)
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		content string
		wantErr string
		want    fakellm.Script
	}{
		{
			name: "full",
			content: `{"api_key": "k", "models": ["m"], "steps": [
				{"text": "hi", "chunks": 2, "delay": "5ms", "chunk_delay": "1ms"},
				{"match": "w", "repeat": true, "tool_calls": [{"id": "c", "name": "t", "arguments": {"a": 1}}]},
				{"error": {"status": 429, "message": "slow down"}}]}`,
			want: fakellm.Script{APIKey: "k", Models: []string{"m"}, Steps: []fakellm.Step{
				{Text: "hi", Chunks: 2, Delay: fakellm.Duration(5 * time.Millisecond), ChunkDelay: fakellm.Duration(time.Millisecond)},
				{Match: "w", Repeat: true, ToolCalls: []fakellm.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{"a": 1}`)}}},
				{Error: &fakellm.Error{Status: 429, Message: "slow down"}},
			}},
		},
		{name: "unknown field", content: `{"steps": [{"txt": "typo"}]}`, wantErr: "unknown field"},
		{name: "bad duration", content: `{"steps": [{"delay": 5}]}`, wantErr: "duration"},
		{name: "error with text", content: `{"steps": [{"text": "x", "error": {"status": 500, "message": "m"}}]}`, wantErr: "steps[0]: error excludes"},
		{name: "bad status", content: `{"steps": [{"error": {"status": 200, "message": "m"}}]}`, wantErr: "not an HTTP error status"},
		{name: "nameless tool call", content: `{"steps": [{"tool_calls": [{"arguments": [1]}]}]}`, wantErr: "name is required"},
		{name: "array arguments", content: `{"steps": [{"tool_calls": [{"name": "t", "arguments": [1]}]}]}`, wantErr: "JSON object or a string"},
		{name: "raw with text", content: `{"steps": [{"text": "x", "raw_chunks": [{}]}]}`, wantErr: "raw_chunks exclude"},
		{name: "echo with text", content: `{"steps": [{"text": "x", "echo": true}]}`, wantErr: "exclude each other"},
		{name: "negative chunks", content: `{"steps": [{"chunks": -1}]}`, wantErr: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fakellm.LoadScript(write(tt.name+".json", tt.content))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("script =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
	if _, err := fakellm.LoadScript(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
}

// TestScriptRoundTrip: a script built in Go and written as JSON (say, for
// the fake-llm command in an end-to-end test) loads back unchanged.
func TestScriptRoundTrip(t *testing.T) {
	want := fakellm.Script{Steps: []fakellm.Step{
		{Text: "a", Delay: fakellm.Duration(1500 * time.Millisecond), ChunkDelay: fakellm.Duration(time.Microsecond)},
		{ToolCalls: []fakellm.ToolCall{{Name: "t", Arguments: json.RawMessage(`{"x":1}`)}}},
	}}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := fakellm.LoadScript(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadScript = %+v, %v; want %+v (JSON %s)", got, err, want, b)
	}
}

func TestInvalidBody(t *testing.T) {
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Text: "kept"}}})
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || fake.Pending() != 1 || len(fake.Requests()) != 1 || fake.Requests()[0].Fields != nil {
		t.Fatalf("status %d, pending %d, requests %+v", resp.StatusCode, fake.Pending(), fake.Requests())
	}
}
