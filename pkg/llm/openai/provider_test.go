package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/openai"
)

// newProvider returns a provider for base without SDK retries.
func newProvider(t *testing.T, base string, opts ...openai.Option) *openai.Provider {
	t.Helper()
	p, err := openai.New(append([]openai.Option{openai.WithBaseURL(base), openai.WithMaxRetries(0)}, opts...)...)
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	return p
}

func userCall(text string) llm.Call {
	return llm.Call{Model: "fake-model", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(text)}}}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// collect runs call and returns the response and every delta.
func collect(t *testing.T, p llm.Provider, call llm.Call) (llm.Response, []llm.Delta) {
	t.Helper()
	var deltas []llm.Delta
	resp, err := p.Complete(t.Context(), call, func(d llm.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return resp, deltas
}

func joinDeltas(deltas []llm.Delta, kind string) (string, int) {
	var b strings.Builder
	n := 0
	for _, d := range deltas {
		if d.Kind == kind {
			b.WriteString(d.Text)
			n++
		}
	}
	return b.String(), n
}

func TestCompleteStreams(t *testing.T) {
	tests := []struct {
		name          string
		step          fakellm.Step
		prompt        string
		wantText      string
		wantTextParts int
		wantReasoning string
		wantCalls     []llm.ToolCall
		wantUsage     *llm.Usage
	}{
		{
			name:          "text in chunks",
			step:          fakellm.Step{Text: "Hello there, friend", Chunks: 4},
			wantText:      "Hello there, friend",
			wantTextParts: 4,
		},
		{
			name:          "echo",
			step:          fakellm.Step{Echo: true, Chunks: 2},
			prompt:        "say it back",
			wantText:      "say it back",
			wantTextParts: 2,
		},
		{
			name:          "reasoning then text",
			step:          fakellm.Step{Reasoning: "think hard", Text: "42", Chunks: 2},
			wantText:      "42",
			wantTextParts: 2,
			wantReasoning: "think hard",
		},
		{
			name: "reasoning field of openrouter",
			step: fakellm.Step{Raw: []json.RawMessage{
				raw(`{"choices":[{"index":0,"delta":{"reasoning":"first "}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"reasoning":"second"}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"content":"done","reasoning":null}}]}`),
			}},
			wantText:      "done",
			wantTextParts: 1,
			wantReasoning: "first second",
		},
		{
			name:     "usage with cached tokens",
			step:     fakellm.Step{Text: "ok", Chunks: 1, Usage: &fakellm.Usage{PromptTokens: 100, CompletionTokens: 1, TotalTokens: 101, CachedTokens: 64}},
			wantText: "ok", wantTextParts: 1,
			wantUsage: &llm.Usage{PromptTokens: 100, CompletionTokens: 1, TotalTokens: 101, PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 64}},
		},
		{
			name: "tool calls with split arguments",
			step: fakellm.Step{Text: "calling", Chunks: 5, ToolCalls: []fakellm.ToolCall{
				{ID: "call_a", Name: "bash", Arguments: raw(`{"cmd": "ls -la /tmp"}`)},
				{Name: "fs_read", Arguments: raw(`"{\"path\": \"x"`)},
			}},
			wantText: "calling", wantTextParts: 5,
			wantCalls: []llm.ToolCall{
				{ID: "call_a", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: `{"cmd":"ls -la /tmp"}`}},
				{ID: "call_2", Type: "function", Function: llm.FunctionCall{Name: "fs_read", Arguments: `{"path": "x`}},
			},
		},
		{
			name: "tool-call deltas out of order merged by index",
			step: fakellm.Step{Raw: []json.RawMessage{
				raw(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c2","type":"function","function":{"name":"second","arguments":"{\"b\":"}}]}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"get_","arguments":""}}]}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{\"city\""}}]}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c2-final","function":{"name":"second","arguments":"2}"}}]}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"Oslo\"}"}}]}}]}`),
				raw(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"type":"function"}]}}]}`),
			}},
			wantCalls: []llm.ToolCall{
				{ID: "call_0", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
				{ID: "call_1", Type: "function", Function: llm.FunctionCall{Arguments: "{}"}},
				{ID: "c2-final", Type: "function", Function: llm.FunctionCall{Name: "second", Arguments: `{"b":2}`}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{tt.step}})
			prompt := tt.prompt
			if prompt == "" {
				prompt = "hi"
			}
			resp, deltas := collect(t, newProvider(t, base), userCall(prompt))
			if resp.Text != tt.wantText {
				t.Errorf("text = %q, want %q", resp.Text, tt.wantText)
			}
			if text, n := joinDeltas(deltas, llm.DeltaText); text != tt.wantText || n != tt.wantTextParts {
				t.Errorf("text deltas = %q in %d parts, want %q in %d", text, n, tt.wantText, tt.wantTextParts)
			}
			if resp.Reasoning != tt.wantReasoning {
				t.Errorf("reasoning = %q, want %q", resp.Reasoning, tt.wantReasoning)
			}
			if r, _ := joinDeltas(deltas, llm.DeltaReasoning); r != tt.wantReasoning {
				t.Errorf("reasoning deltas = %q, want %q", r, tt.wantReasoning)
			}
			if !reflect.DeepEqual(resp.ToolCalls, tt.wantCalls) {
				t.Errorf("tool calls =\n%+v\nwant\n%+v", resp.ToolCalls, tt.wantCalls)
			}
			if tt.wantUsage != nil && !reflect.DeepEqual(resp.Usage, tt.wantUsage) {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.wantUsage)
			}
			if len(tt.step.Raw) == 0 && resp.Usage == nil {
				t.Error("usage missing: include_usage must be requested and the usage chunk read")
			}
			if got := fake.Requests()[0].Fields["stream_options"]; !reflect.DeepEqual(got, map[string]any{"include_usage": true}) {
				t.Errorf("stream_options = %v, want include_usage true", got)
			}
		})
	}
}

func TestCompleteNilOnDelta(t *testing.T) {
	_, base := fakellm.Start(t, fakellm.Script{})
	resp, err := newProvider(t, base).Complete(t.Context(), userCall("quiet"), nil)
	if err != nil || resp.Text != "quiet" {
		t.Fatalf("Complete = %q, %v; want the echo", resp.Text, err)
	}
}

// TestRequestBody pins Bub's precedence: completion args < stream_options <
// managed keys < reasoning_effort (behaviour checks 45 and 47).
func TestRequestBody(t *testing.T) {
	schema := llm.ToolSchema{Name: "bash", Description: "run", Parameters: map[string]any{"type": "object"}}
	args := map[string]any{
		"temperature":           0.2,
		"reasoning_effort":      "low",
		"model":                 "evil",
		"messages":              []any{},
		"max_tokens":            1,
		"max_completion_tokens": 2,
		"stream":                false,
		"stream_options":        map[string]any{"include_usage": false},
		"tools":                 []any{"x"},
	}
	tests := []struct {
		name string
		opts []openai.Option
		call func(llm.Call) llm.Call
		want map[string]any // keys that must have these values
		gone []string       // keys that must be absent
	}{
		{
			name: "managed keys win over completion args",
			opts: []openai.Option{openai.WithCompletionArgs(args)},
			call: func(c llm.Call) llm.Call { c.MaxTokens = 512; c.ReasoningEffort = "high"; return c },
			want: map[string]any{
				"temperature": 0.2, "reasoning_effort": "high", "model": "fake-model",
				"max_tokens": 512.0, "stream": true, "stream_options": map[string]any{"include_usage": true},
			},
			gone: []string{"tools", "max_completion_tokens"},
		},
		{
			name: "reasoning effort from completion args when the call has none",
			opts: []openai.Option{openai.WithCompletionArgs(args)},
			want: map[string]any{"reasoning_effort": "low"},
			gone: []string{"max_tokens", "max_completion_tokens", "tools"},
		},
		{
			name: "tools and max_completion_tokens",
			opts: []openai.Option{openai.WithMaxCompletionTokens()},
			call: func(c llm.Call) llm.Call {
				c.Tools = []llm.ToolSchema{schema, {Name: "noargs"}}
				c.MaxTokens = 99
				return c
			},
			want: map[string]any{
				"max_completion_tokens": 99.0,
				"tools": []any{
					map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "run", "parameters": map[string]any{"type": "object"}}},
					map[string]any{"type": "function", "function": map[string]any{"name": "noargs", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
				},
			},
			gone: []string{"max_tokens", "reasoning_effort"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := fakellm.Start(t, fakellm.Script{})
			call := userCall("hi")
			if tt.call != nil {
				call = tt.call(call)
			}
			collect(t, newProvider(t, base, tt.opts...), call)
			fields := fake.Requests()[0].Fields
			for k, want := range tt.want {
				if !reflect.DeepEqual(fields[k], want) {
					t.Errorf("%s = %#v, want %#v", k, fields[k], want)
				}
			}
			for _, k := range tt.gone {
				if v, ok := fields[k]; ok {
					t.Errorf("%s = %#v, want absent", k, v)
				}
			}
		})
	}
}

// TestMessagesReachTheWire checks content parts, tool calls and tool
// results arrive as given.
func TestMessagesReachTheWire(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: llm.Text("be brief")},
		{Role: llm.RoleUser, Content: llm.Content{Parts: []llm.Part{
			{Type: "text", Text: "what is this?"},
			{Type: "image_url", ImageURL: &llm.URLPart{URL: "data:image/png;base64,AAAA"}},
			{Type: "input_audio", InputAudio: &llm.AudioPart{Data: "UklG", Format: "wav"}},
		}}},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: `{"cmd":"ls"}`}}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: llm.Text(`{"kind":"tool","message":"denied by policy"}`)},
	}
	fake, base := fakellm.Start(t, fakellm.Script{})
	collect(t, newProvider(t, base), llm.Call{Model: "m", Messages: msgs})
	req := fake.Requests()[0]
	if !reflect.DeepEqual(req.Messages, msgs) {
		t.Fatalf("messages on the wire =\n%+v\nwant\n%+v", req.Messages, msgs)
	}
	if !strings.Contains(string(req.Body), `"image_url":{"url":"data:image/png;base64,AAAA"}`) {
		t.Errorf("image part missing from body %s", req.Body)
	}
}

func TestAPIKeyHeader(t *testing.T) {
	tests := []struct {
		name     string
		key      llm.Secret
		wantCode int // 0 = success
	}{
		{name: "right key", key: "sk-right"},
		{name: "wrong key", key: "sk-wrong", wantCode: http.StatusUnauthorized},
		{name: "no key", wantCode: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, base := fakellm.Start(t, fakellm.Script{APIKey: "sk-right"})
			_, err := newProvider(t, base, openai.WithAPIKey(tt.key)).Complete(t.Context(), userCall("hi"), nil)
			if got := statusOf(err); got != tt.wantCode {
				t.Fatalf("status = %d (err %v), want %d", got, err, tt.wantCode)
			}
		})
	}
}

// statusOf returns the status_code detail of a provider error, 0 for nil.
func statusOf(err error) int {
	if err == nil {
		return 0
	}
	var be *bub.Error
	if !errors.As(err, &be) || be.Kind != bub.KindProvider {
		return -1
	}
	code, _ := be.Details["status_code"].(int)
	return code
}

func TestProviderErrors(t *testing.T) {
	// rawServer answers every request with status and body: shapes of
	// error bodies the fake (which speaks proper OpenAI) never sends.
	rawServer := func(status int, body string) func(*testing.T) string {
		return func(t *testing.T) string {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(ts.Close)
			return ts.URL + "/v1"
		}
	}
	tests := []struct {
		name        string
		base        func(t *testing.T) string
		wantStatus  int
		wantMessage string
		wantCode    string
		wantDeltas  string
	}{
		{
			name: "context length exceeded",
			base: func(t *testing.T) string {
				_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Error: &fakellm.Error{
					Status: 400, Message: "This model's maximum context length is 8192 tokens", Type: "invalid_request_error", Code: "context_length_exceeded",
				}}}})
				return base
			},
			wantStatus: 400, wantMessage: "maximum context length is 8192 tokens", wantCode: "context_length_exceeded",
		},
		{
			name: "server error",
			base: func(t *testing.T) string {
				_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Error: &fakellm.Error{Status: 503, Message: "overloaded"}}}})
				return base
			},
			wantStatus: 503, wantMessage: "overloaded",
		},
		{
			name:       "non-JSON error body",
			base:       rawServer(http.StatusBadGateway, "<html>bad gateway</html>"),
			wantStatus: 502, wantMessage: "HTTP 502: <html>bad gateway</html>",
		},
		{
			name:       "error as a plain string",
			base:       rawServer(http.StatusNotFound, `{"error": "model 'x' not found"}`),
			wantStatus: 404, wantMessage: `{"error": "model 'x' not found"}`,
		},
		{
			name:       "empty error body",
			base:       rawServer(http.StatusTooManyRequests, ""),
			wantStatus: 429, wantMessage: "HTTP 429: Too Many Requests",
		},
		{
			name: "error event mid-stream",
			base: func(t *testing.T) string {
				_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Text: "partial", Chunks: 1, StreamError: "upstream went away"}}})
				return base
			},
			wantMessage: "upstream went away", wantDeltas: "partial",
		},
		{
			name: "connection refused",
			base: func(t *testing.T) string {
				dead := httptest.NewServer(http.NotFoundHandler())
				dead.Close()
				return dead.URL + "/v1"
			},
			wantMessage: "connect",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deltas []llm.Delta
			_, err := newProvider(t, tt.base(t), openai.WithName("prov")).Complete(t.Context(), userCall("hi"), func(d llm.Delta) { deltas = append(deltas, d) })
			var be *bub.Error
			if !errors.As(err, &be) || be.Kind != bub.KindProvider {
				t.Fatalf("err = %v (%T), want a provider *bub.Error", err, err)
			}
			if !strings.Contains(be.Message, tt.wantMessage) || !strings.Contains(be.Message, "prov") {
				t.Errorf("message = %q, want it to contain %q and the provider name", be.Message, tt.wantMessage)
			}
			status, hasStatus := be.Details["status_code"]
			if tt.wantStatus != 0 && status != tt.wantStatus || tt.wantStatus == 0 && hasStatus {
				t.Errorf("status_code = %v, want %d", status, tt.wantStatus)
			}
			if tt.wantCode != "" && be.Details["code"] != tt.wantCode {
				t.Errorf("code = %v, want %q", be.Details["code"], tt.wantCode)
			}
			if be.Details["provider"] != "prov" || be.Details["model"] != "fake-model" {
				t.Errorf("details = %v, want provider and model", be.Details)
			}
			if text, _ := joinDeltas(deltas, llm.DeltaText); text != tt.wantDeltas {
				t.Errorf("deltas = %q, want %q", text, tt.wantDeltas)
			}
		})
	}
}

func TestCancellation(t *testing.T) {
	tests := []struct {
		name string
		step fakellm.Step
		// cancelAfter cancels after this many text deltas; -1 before the call.
		cancelAfter int
		want        error
	}{
		{name: "before the call", step: fakellm.Step{Text: "never"}, cancelAfter: -1, want: context.Canceled},
		{name: "before the first byte", step: fakellm.Step{Text: "never", Delay: fakellm.Duration(time.Hour)}, cancelAfter: 0, want: context.Canceled},
		{name: "mid-stream", step: fakellm.Step{Text: "one two three", ChunkDelay: fakellm.Duration(time.Hour)}, cancelAfter: 1, want: context.Canceled},
		{name: "deadline", step: fakellm.Step{Text: "slow", Delay: fakellm.Duration(time.Hour)}, cancelAfter: 0, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{tt.step}})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			switch {
			case tt.want == context.DeadlineExceeded:
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			case tt.cancelAfter < 0:
				cancel()
			case tt.cancelAfter == 0:
				go func() {
					if _, err := fake.WaitRequests(ctx, 1); err == nil {
						cancel()
					}
				}()
			}
			deltas := 0
			_, err := newProvider(t, base).Complete(ctx, userCall("hi"), func(d llm.Delta) {
				if deltas++; deltas == tt.cancelAfter {
					cancel()
				}
			})
			if err != tt.want {
				t.Fatalf("err = %v (%T), want exactly %v", err, err, tt.want)
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  openai.Option
	}{
		{name: "relative base", opt: openai.WithBaseURL("/v1")},
		{name: "ftp base", opt: openai.WithBaseURL("ftp://host/v1")},
		{name: "negative retries", opt: openai.WithMaxRetries(-1)},
		{name: "nil client", opt: openai.WithHTTPClient(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := openai.New(tt.opt); err == nil {
				t.Fatal("New succeeded, want an error")
			}
		})
	}
}

func TestFactory(t *testing.T) {
	fake, base := fakellm.Start(t, fakellm.Script{APIKey: "sk-f"})
	p, err := openai.Factory(openai.WithMaxRetries(0))(llm.ProviderConfig{
		Provider: "vllm", BaseURL: base, APIKey: "sk-f", CompletionArgs: map[string]any{"top_p": 0.5},
	})
	if err != nil {
		t.Fatalf("Factory: %v", err)
	}
	call := userCall("hi")
	call.MaxTokens = 10
	collect(t, p, call)
	fields := fake.Requests()[0].Fields
	if fields["top_p"] != 0.5 || fields["max_tokens"] != 10.0 {
		t.Fatalf("body = %v, want top_p and max_tokens", fields)
	}
}

// TestConcurrentCallsReuseConnections: a provider given no HTTP client
// keeps the connections a burst of concurrent calls opened, so the next
// burst dials none (net/http's default client keeps 2 and would dial 6
// of 8 again).
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const n = 8
	var (
		opened  atomic.Int64
		arrived sync.WaitGroup // a burst's calls that reached the server
	)
	model := fakellm.New(fakellm.Script{Steps: []fakellm.Step{{Echo: true, Repeat: true}}})
	// Each burst's calls are answered once all n are in flight, so n
	// connections are open at once.
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait()
		model.ServeHTTP(w, r)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	p := newProvider(t, ts.URL+"/v1")
	burst := func() int64 {
		before := opened.Load()
		arrived.Add(n)
		var calls sync.WaitGroup
		for i := range n {
			calls.Go(func() {
				if _, err := p.Complete(t.Context(), userCall(fmt.Sprint("call ", i)), nil); err != nil {
					t.Error(err)
				}
			})
		}
		calls.Wait()
		return opened.Load() - before
	}
	if got := burst(); got != n {
		t.Fatalf("first burst opened %d connections, want %d", got, n)
	}
	if got := burst(); got != 0 {
		t.Errorf("second burst opened %d connections, want 0 (all %d reused)", got, n)
	}
}

// BenchmarkComplete measures one streamed call through the real client
// against the fake server's echo (an empty script).
func BenchmarkComplete(b *testing.B) {
	_, base := fakellm.Start(b, fakellm.Script{})
	p, err := openai.New(openai.WithBaseURL(base), openai.WithMaxRetries(0))
	if err != nil {
		b.Fatal(err)
	}
	call := userCall("a prompt of a few words to echo back")
	for b.Loop() {
		if _, err := p.Complete(b.Context(), call, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIgnoresOpenAIEnvironment: keys and base URLs come from Bub's config
// only, never from the SDK's OPENAI_* variables.
func TestIgnoresOpenAIEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	fake, base := fakellm.Start(t, fakellm.Script{})
	collect(t, newProvider(t, base), userCall("hi"))
	h := fake.Requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" {
		t.Fatalf("environment leaked into the request: %v", h)
	}
}
