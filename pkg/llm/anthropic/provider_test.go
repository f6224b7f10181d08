package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/bubbus/bub/internal/fakeanthropic"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/anthropic"
	"github.com/bubbus/bub/pkg/llm/providers"
)

// newProvider returns a provider for base without SDK retries.
func newProvider(t *testing.T, base string, opts ...anthropic.Option) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(append([]anthropic.Option{anthropic.WithBaseURL(base), anthropic.WithMaxRetries(0)}, opts...)...)
	if err != nil {
		t.Fatalf("anthropic.New: %v", err)
	}
	return p
}

func userCall(text string) llm.Call {
	return llm.Call{Model: "claude-x", MaxTokens: 100, Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(text)}}}
}

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

// field decodes one field of a recorded request body into v.
func field(t *testing.T, req fakeanthropic.Request, name string, v any) {
	t.Helper()
	raw, err := json.Marshal(req.Fields[name])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("field %s = %s: %v", name, raw, err)
	}
}

func TestStreamingText(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{{Text: "Hello there, world", Chunks: 3}}})
	resp, deltas := collect(t, newProvider(t, base), userCall("hi"))
	text, n := joinDeltas(deltas, llm.DeltaText)
	if resp.Text != "Hello there, world" || text != resp.Text || n != 3 {
		t.Fatalf("text %q, deltas %q in %d pieces", resp.Text, text, n)
	}
	req := fake.Requests()[0]
	if req.Fields["stream"] != true || req.Fields["model"] != "claude-x" || req.Fields["max_tokens"] != 100.0 {
		t.Errorf("body = %s", req.Body)
	}
	if _, ok := req.Fields["stream_options"]; ok {
		t.Errorf("stream_options sent to Anthropic: %s", req.Body)
	}
}

// TestNonStreamingFakeAnswer: the fake's JSON answer, read by the SDK's
// non-streaming call, is the message the stream accumulates to.
func TestNonStreamingFakeAnswer(t *testing.T) {
	_, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{{
		Thinking: "hmm", Text: "done", ToolCalls: []fakeanthropic.ToolCall{{ID: "toolu_1", Name: "now", Input: `{"tz":"UTC"}`}},
		Usage: &fakeanthropic.Usage{InputTokens: 3, OutputTokens: 4, CacheReadInputTokens: 5},
	}}})
	svc := asdk.NewMessageService(option.WithBaseURL(base), option.WithMaxRetries(0))
	msg, err := svc.New(t.Context(), asdk.MessageNewParams{
		Model: "claude-x", MaxTokens: 10, Messages: []asdk.MessageParam{asdk.NewUserMessage(asdk.NewTextBlock("hi"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, b := range msg.Content {
		types = append(types, b.Type)
	}
	if !reflect.DeepEqual(types, []string{"thinking", "text", "tool_use"}) || msg.Content[0].Signature == "" ||
		msg.Content[1].Text != "done" || string(msg.Content[2].Input) != `{"tz":"UTC"}` || msg.StopReason != "tool_use" ||
		msg.Usage.CacheReadInputTokens != 5 || msg.Usage.OutputTokens != 4 {
		t.Fatalf("message = %s", msg.RawJSON())
	}
}

// TestSystemAndCacheControl (behaviour check 46): the system messages are
// the top-level system field, and cache_control {type: ephemeral} is on
// the request, the last system block and the last tool.
func TestSystemAndCacheControl(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	call := userCall("hi")
	call.Messages = append([]llm.Message{
		{Role: llm.RoleSystem, Content: llm.Text("You are Bub.")},
		{Role: llm.RoleSystem, Content: llm.Text("Today is Tuesday.")},
	}, call.Messages...)
	call.Tools = []llm.ToolSchema{
		{Name: "fs_read", Description: "read a file", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"},
			"additionalProperties": false,
		}},
		{Name: "now"},
	}
	collect(t, newProvider(t, base), call)
	req := fake.Requests()[0]
	var system []map[string]any
	field(t, req, "system", &system)
	wantSystem := []map[string]any{
		{"type": "text", "text": "You are Bub."},
		{"type": "text", "text": "Today is Tuesday.", "cache_control": map[string]any{"type": "ephemeral"}},
	}
	if !reflect.DeepEqual(system, wantSystem) {
		t.Errorf("system = %v, want %v", system, wantSystem)
	}
	var messages []map[string]any
	field(t, req, "messages", &messages)
	if len(messages) != 1 || messages[0]["role"] != "user" {
		t.Errorf("messages = %v, want only the user message", messages)
	}
	var tools []map[string]any
	field(t, req, "tools", &tools)
	wantTools := []map[string]any{
		{"name": "fs_read", "description": "read a file", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"},
			"additionalProperties": false,
		}},
		{"name": "now", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}, "cache_control": map[string]any{"type": "ephemeral"}},
	}
	if !reflect.DeepEqual(tools, wantTools) {
		t.Errorf("tools = %v, want %v", tools, wantTools)
	}
	if !reflect.DeepEqual(req.Fields["cache_control"], map[string]any{"type": "ephemeral"}) {
		t.Errorf("top-level cache_control = %v", req.Fields["cache_control"])
	}
}

// TestToolCallRoundTrip: tool_use blocks (input streamed as
// input_json_delta) become tool calls; the next request carries them as
// the assistant's tool_use blocks and the tool messages as one user
// message of tool_result blocks, which the fake checks as the API does.
func TestToolCallRoundTrip(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{
		{Text: "Let me look.", ToolCalls: []fakeanthropic.ToolCall{
			{ID: "toolu_a", Name: "get_weather", Input: `{"city":"Paris","days":2}`},
			{ID: "toolu_b", Name: "now"},
		}},
		{Text: "Sunny."},
	}})
	p := newProvider(t, base)
	call := userCall("weather?")
	first, _ := collect(t, p, call)
	wantCalls := []llm.ToolCall{
		{ID: "toolu_a", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris","days":2}`}},
		{ID: "toolu_b", Type: "function", Function: llm.FunctionCall{Name: "now", Arguments: "{}"}},
	}
	if first.Text != "Let me look." || !reflect.DeepEqual(first.ToolCalls, wantCalls) {
		t.Fatalf("first = %+v, want the text and %+v", first, wantCalls)
	}
	call.Messages = append(call.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: llm.Text(first.Text), ToolCalls: first.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_a", Content: llm.Text(`"sunny"`)},
		llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_b", Content: llm.Text("")},
	)
	second, _ := collect(t, p, call)
	if second.Text != "Sunny." {
		t.Fatalf("second = %+v", second)
	}
	var messages []map[string]any
	field(t, fake.Requests()[1], "messages", &messages)
	want := []map[string]any{
		{"role": "user", "content": []any{map[string]any{"type": "text", "text": "weather?"}}},
		{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "Let me look."},
			map[string]any{"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": map[string]any{"city": "Paris", "days": 2.0}},
			map[string]any{"type": "tool_use", "id": "toolu_b", "name": "now", "input": map[string]any{}},
		}},
		{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_a", "content": []any{map[string]any{"type": "text", "text": `"sunny"`}}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_b"},
		}},
	}
	if !reflect.DeepEqual(messages, want) {
		got, _ := json.Marshal(messages)
		t.Errorf("messages = %s", got)
	}
}

func TestMalformedToolArgumentsSentAsEmptyObject(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	call := userCall("go")
	call.Messages = append(call.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Type: "function", Function: llm.FunctionCall{Name: "x", Arguments: `{"unterminated`}}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Content: llm.Text("error: bad arguments")},
	)
	collect(t, newProvider(t, base), call)
	if !strings.Contains(string(fake.Requests()[0].Body), `"input":{}`) {
		t.Fatalf("body = %s", fake.Requests()[0].Body)
	}
}

func TestImageParts(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	call := userCall("")
	call.Messages[0].Content = llm.Content{Parts: []llm.Part{
		{Type: "text", Text: "what is this?"},
		{Type: "image_url", ImageURL: &llm.URLPart{URL: "data:image/png;base64,AAAA"}},
		{Type: "image_url", ImageURL: &llm.URLPart{URL: "https://example.com/cat.jpg"}},
	}}
	collect(t, newProvider(t, base), call)
	body := string(fake.Requests()[0].Body)
	for _, want := range []string{
		`{"source":{"data":"AAAA","media_type":"image/png","type":"base64"},"type":"image"}`,
		`{"source":{"url":"https://example.com/cat.jpg","type":"url"},"type":"image"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("body %s lacks %s", body, want)
		}
	}
	call.Messages[0].Content.Parts = append(call.Messages[0].Content.Parts, llm.Part{Type: "input_audio", InputAudio: &llm.AudioPart{Data: "x", Format: "wav"}})
	_, err := newProvider(t, base).Complete(t.Context(), call, nil)
	var be *bub.Error
	if !errors.As(err, &be) || be.Kind != bub.KindInvalidInput || !strings.Contains(be.Message, "input_audio") {
		t.Fatalf("err = %v, want an invalid_input error naming input_audio", err)
	}
	if len(fake.Requests()) != 1 {
		t.Errorf("the audio call reached the server")
	}
}

// TestUsageWithCache: Anthropic's input, cache read and cache write tokens
// become prompt_tokens (all of them), cached_tokens and cache_write_tokens.
func TestUsageWithCache(t *testing.T) {
	_, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{{Text: "ok", Usage: &fakeanthropic.Usage{
		InputTokens: 10, OutputTokens: 7, CacheReadInputTokens: 300, CacheCreationInputTokens: 40,
	}}}})
	resp, _ := collect(t, newProvider(t, base), userCall("hi"))
	want := &llm.Usage{PromptTokens: 350, CompletionTokens: 7, TotalTokens: 357,
		PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 300, CacheWriteTokens: 40}}
	if !reflect.DeepEqual(resp.Usage, want) {
		t.Fatalf("usage = %+v %+v, want %+v %+v", resp.Usage, resp.Usage.PromptTokensDetails, want, want.PromptTokensDetails)
	}
	b, _ := json.Marshal(resp.Usage)
	if !strings.Contains(string(b), `"prompt_tokens_details":{"cached_tokens":300,"cache_write_tokens":40}`) {
		t.Errorf("usage JSON = %s", b)
	}
}

// TestThinking: thinking deltas stream as reasoning; reasoning_effort is a
// thinking budget below max_tokens; the thinking blocks of a tool-calling
// answer go back, signature and all, in the tool loop's next request.
func TestThinking(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{
		{Thinking: "The user wants the time.", ToolCalls: []fakeanthropic.ToolCall{{ID: "toolu_t", Name: "now"}}},
		{Thinking: "Got it.", Text: "It is noon."},
	}})
	p := newProvider(t, base)
	call := userCall("time?")
	call.MaxTokens = 4000
	call.ReasoningEffort = "medium"
	first, deltas := collect(t, p, call)
	reasoning, n := joinDeltas(deltas, llm.DeltaReasoning)
	if first.Reasoning != "The user wants the time." || reasoning != first.Reasoning || n != 3 || first.Text != "" {
		t.Fatalf("reasoning %q, deltas %q in %d, text %q", first.Reasoning, reasoning, n, first.Text)
	}
	var thinking map[string]any
	field(t, fake.Requests()[0], "thinking", &thinking)
	if !reflect.DeepEqual(thinking, map[string]any{"type": "enabled", "budget_tokens": 3999.0}) {
		t.Errorf("thinking = %v, want the medium budget capped below max_tokens", thinking)
	}
	call.Messages = append(call.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: first.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_t", Content: llm.Text("12:00")},
	)
	collect(t, p, call)
	second := fake.Requests()[1]
	if !strings.Contains(string(second.Body), `{"signature":"sig-fake","thinking":"The user wants the time.","type":"thinking"}`) {
		t.Errorf("the thinking block did not go back: %s", second.Body)
	}
	if second.Fields["thinking"] == nil {
		t.Errorf("thinking turned off in a tool loop whose blocks are known")
	}

	// Another provider never saw the first answer: it keeps thinking off
	// for the continued tool loop, which the API would refuse.
	collect(t, newProvider(t, base), call)
	if third := fake.Requests()[2]; third.Fields["thinking"] != nil {
		t.Errorf("thinking on without its blocks: %s", third.Body)
	}
}

func TestReasoningEffort(t *testing.T) {
	tests := []struct {
		name      string
		effort    string
		args      map[string]any
		maxTokens int
		want      any // the thinking field, nil for none
		wantErr   string
	}{
		{name: "high", effort: "high", maxTokens: 30000, want: map[string]any{"type": "enabled", "budget_tokens": 24576.0}},
		{name: "from completion args", args: map[string]any{"reasoning_effort": "low"}, maxTokens: 30000, want: map[string]any{"type": "enabled", "budget_tokens": 2048.0}},
		{name: "call wins over completion args", effort: "minimal", args: map[string]any{"reasoning_effort": "high", "thinking": map[string]any{"type": "disabled"}}, maxTokens: 30000, want: map[string]any{"type": "enabled", "budget_tokens": 1024.0}},
		{name: "none", effort: "none", maxTokens: 30000},
		{name: "thinking from completion args without an effort", args: map[string]any{"thinking": map[string]any{"type": "adaptive"}}, maxTokens: 30000, want: map[string]any{"type": "adaptive"}},
		{name: "unknown", effort: "extreme", maxTokens: 30000, wantErr: `"extreme" is not one of none, high, low, max, medium, minimal, xhigh`},
		{name: "max_tokens too small", effort: "low", maxTokens: 1000, wantErr: "needs max_tokens above 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
			call := userCall("hi")
			call.ReasoningEffort, call.MaxTokens = tt.effort, tt.maxTokens
			_, err := newProvider(t, base, anthropic.WithCompletionArgs(tt.args)).Complete(t.Context(), call, nil)
			if tt.wantErr != "" {
				var be *bub.Error
				if !errors.As(err, &be) || be.Kind != bub.KindInvalidInput || !strings.Contains(be.Message, tt.wantErr) {
					t.Fatalf("err = %v, want invalid_input %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			req := fake.Requests()[0]
			if !reflect.DeepEqual(req.Fields["thinking"], tt.want) {
				t.Errorf("thinking = %v, want %v", req.Fields["thinking"], tt.want)
			}
			if _, ok := req.Fields["reasoning_effort"]; ok {
				t.Errorf("reasoning_effort sent: %s", req.Body)
			}
		})
	}
}

// TestCompletionArgs: extra fields are sent, under the managed ones.
func TestCompletionArgs(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	args := map[string]any{
		"temperature": 0.2, "top_k": 5,
		"model": "other", "max_tokens": 1, "stream": false, "system": "override", "cache_control": nil,
		"stream_options": map[string]any{"include_usage": true},
	}
	collect(t, newProvider(t, base, anthropic.WithCompletionArgs(args)), userCall("hi"))
	f := fake.Requests()[0].Fields
	if f["temperature"] != 0.2 || f["top_k"] != 5.0 || f["model"] != "claude-x" || f["max_tokens"] != 100.0 || f["stream"] != true {
		t.Errorf("body = %v", f)
	}
	if _, ok := f["system"]; ok {
		t.Errorf("system from completion args: %v", f["system"])
	}
	if _, ok := f["stream_options"]; ok || f["cache_control"] == nil {
		t.Errorf("stream_options %v, cache_control %v", f["stream_options"], f["cache_control"])
	}
}

func TestMaxTokensDefault(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	call := userCall("hi")
	call.MaxTokens = 0
	collect(t, newProvider(t, base), call)
	if got := fake.Requests()[0].Fields["max_tokens"]; got != float64(llm.DefaultMaxTokens) {
		t.Fatalf("max_tokens = %v", got)
	}
}

func TestAPIKey(t *testing.T) {
	tests := []struct {
		name     string
		key      llm.Secret
		wantCode int // 0 = success
	}{
		{name: "right key", key: "sk-ant-right"},
		{name: "wrong key", key: "sk-ant-wrong", wantCode: http.StatusUnauthorized},
		{name: "no key", wantCode: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, base := fakeanthropic.Start(t, fakeanthropic.Script{APIKey: "sk-ant-right"})
			_, err := newProvider(t, base, anthropic.WithAPIKey(tt.key)).Complete(t.Context(), userCall("hi"), nil)
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

// TestProviderErrors: every failure is a provider *bub.Error with the
// status_code, the API's error type and message, as from llm/openai.
func TestProviderErrors(t *testing.T) {
	fakeError := func(e *fakeanthropic.Error) func(*testing.T) string {
		return func(t *testing.T) string {
			_, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{{Error: e}}})
			return base
		}
	}
	rawServer := func(status int, body string) func(*testing.T) string {
		return func(t *testing.T) string {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(ts.Close)
			return ts.URL
		}
	}
	tests := []struct {
		name        string
		base        func(t *testing.T) string
		wantStatus  int
		wantType    string
		wantMessage string
		wantDeltas  string
	}{
		{name: "context too long", base: fakeError(&fakeanthropic.Error{Type: "invalid_request_error", Message: "prompt is too long: 208310 tokens > 200000 maximum"}),
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "HTTP 400: prompt is too long: 208310 tokens > 200000 maximum"},
		{name: "invalid request", base: fakeError(&fakeanthropic.Error{Type: "invalid_request_error", Message: "temperature: range is 0 to 1"}),
			wantStatus: 400, wantType: "invalid_request_error", wantMessage: "temperature: range is 0 to 1"},
		{name: "authentication", base: fakeError(&fakeanthropic.Error{Type: "authentication_error", Message: "invalid x-api-key"}),
			wantStatus: 401, wantType: "authentication_error", wantMessage: "invalid x-api-key"},
		{name: "permission", base: fakeError(&fakeanthropic.Error{Type: "permission_error", Message: "no access to this model"}),
			wantStatus: 403, wantType: "permission_error", wantMessage: "no access to this model"},
		{name: "not found", base: fakeError(&fakeanthropic.Error{Type: "not_found_error", Message: "model: claude-x"}),
			wantStatus: 404, wantType: "not_found_error", wantMessage: "model: claude-x"},
		{name: "rate limit", base: fakeError(&fakeanthropic.Error{Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit"}),
			wantStatus: 429, wantType: "rate_limit_error", wantMessage: "per-minute rate limit"},
		{name: "api error", base: fakeError(&fakeanthropic.Error{Type: "api_error", Message: "Internal server error"}),
			wantStatus: 500, wantType: "api_error", wantMessage: "Internal server error"},
		{name: "overloaded", base: fakeError(&fakeanthropic.Error{Type: "overloaded_error", Message: "Overloaded"}),
			wantStatus: 529, wantType: "overloaded_error", wantMessage: "HTTP 529: Overloaded"},
		{name: "non-JSON error body", base: rawServer(http.StatusBadGateway, "<html>bad gateway</html>"),
			wantStatus: 502, wantMessage: "HTTP 502: <html>bad gateway</html>"},
		{name: "empty error body", base: rawServer(http.StatusServiceUnavailable, ""),
			wantStatus: 503, wantMessage: "HTTP 503: Service Unavailable"},
		{name: "request the API refuses", base: func(t *testing.T) string {
			_, base := fakeanthropic.Start(t, fakeanthropic.Script{})
			return base
		}, wantStatus: 400, wantType: "invalid_request_error", wantMessage: "tool_use_id"},
		{name: "error event mid-stream", base: func(t *testing.T) string {
			_, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{{Text: "partial", Chunks: 1,
				StreamError: &fakeanthropic.Error{Type: "overloaded_error", Message: "Overloaded"}}}})
			return base
		}, wantType: "overloaded_error", wantMessage: "stream error: Overloaded", wantDeltas: "partial"},
		{name: "stream cut before message_stop", base: rawServer(http.StatusOK,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"),
			wantMessage: "stream ended before message_stop"},
		{name: "connection refused", base: func(t *testing.T) string {
			dead := httptest.NewServer(http.NotFoundHandler())
			dead.Close()
			return dead.URL
		}, wantMessage: "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := userCall("hi")
			if tt.name == "request the API refuses" {
				call.Messages = append(call.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_nowhere", Content: llm.Text("x")})
			}
			var deltas []llm.Delta
			_, err := newProvider(t, tt.base(t), anthropic.WithName("prov")).Complete(t.Context(), call, func(d llm.Delta) { deltas = append(deltas, d) })
			var be *bub.Error
			if !errors.As(err, &be) || be.Kind != bub.KindProvider {
				t.Fatalf("err = %v (%T), want a provider *bub.Error", err, err)
			}
			if !strings.Contains(be.Message, tt.wantMessage) || !strings.HasPrefix(be.Message, "provider prov model claude-x: ") {
				t.Errorf("message = %q, want it to contain %q and the provider name", be.Message, tt.wantMessage)
			}
			status, hasStatus := be.Details["status_code"]
			if tt.wantStatus != 0 && status != tt.wantStatus || tt.wantStatus == 0 && hasStatus {
				t.Errorf("status_code = %v, want %d", status, tt.wantStatus)
			}
			if typ, _ := be.Details["type"].(string); typ != tt.wantType {
				t.Errorf("type = %q, want %q", typ, tt.wantType)
			}
			if be.Details["provider"] != "prov" || be.Details["model"] != "claude-x" {
				t.Errorf("details = %v, want provider and model", be.Details)
			}
			if text, _ := joinDeltas(deltas, llm.DeltaText); text != tt.wantDeltas {
				t.Errorf("deltas = %q, want %q", text, tt.wantDeltas)
			}
		})
	}
}

func TestCancellation(t *testing.T) {
	_, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := newProvider(t, base).Complete(ctx, userCall("hi"), nil); err != context.Canceled {
		t.Fatalf("err = %v, want exactly context.Canceled", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, opt := range map[string]anthropic.Option{
		"relative base":    anthropic.WithBaseURL("/v1"),
		"ftp base":         anthropic.WithBaseURL("ftp://host"),
		"negative retries": anthropic.WithMaxRetries(-1),
		"nil client":       anthropic.WithHTTPClient(nil),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := anthropic.New(opt); err == nil {
				t.Fatal("New succeeded, want an error")
			}
		})
	}
}

// TestBaseURLWithV1: a base written with /v1, as for OpenAI, reaches the
// same /v1/messages.
func TestBaseURLWithV1(t *testing.T) {
	_, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	resp, _ := collect(t, newProvider(t, base+"/v1/"), userCall("hi"))
	if resp.Text != "hi" {
		t.Fatalf("text = %q", resp.Text)
	}
}

// TestIgnoresAnthropicEnvironment: keys and base URLs come from Bub's
// config only, never from the SDK's ANTHROPIC_* variables.
func TestIgnoresAnthropicEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-env")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "tok-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	collect(t, newProvider(t, base), userCall("hi"))
	h := fake.Requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Fatalf("environment leaked into the request: %v", h)
	}
}

// TestRouter: "anthropic:<model>" selects this provider through
// llm/providers with the key and base of BUB_ANTHROPIC_API_KEY /
// BUB_ANTHROPIC_API_BASE, while "openai:" stays on the OpenAI client.
func TestRouter(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{APIKey: "sk-ant", Steps: []fakeanthropic.Step{{Text: "from claude"}}})
	openaiFake, openaiBase := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Text: "from openai"}}})
	env := map[string]string{
		"BUB_MODEL":              "anthropic:claude-x",
		"BUB_ANTHROPIC_API_KEY":  "sk-ant",
		"BUB_ANTHROPIC_API_BASE": base,
		"BUB_OPENAI_API_BASE":    openaiBase,
		"BUB_OPENAI_API_KEY":     "sk-openai",
	}
	cfg, err := llm.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	r, err := providers.NewRouter(cfg, llm.WithProviderFactory(anthropic.Name, anthropic.Factory(anthropic.WithMaxRetries(0))))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.Complete(t.Context(), llm.Call{Messages: userCall("hi").Messages}, nil)
	if err != nil || resp.Text != "from claude" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	req := fake.Requests()[0]
	if req.Fields["model"] != "claude-x" || req.Fields["max_tokens"] != float64(llm.DefaultMaxTokens) {
		t.Errorf("body = %s", req.Body)
	}
	resp, err = r.Complete(t.Context(), llm.Call{Model: "openai:gpt-x", Messages: userCall("hi").Messages}, nil)
	if err != nil || resp.Text != "from openai" || len(openaiFake.Requests()) != 1 || len(fake.Requests()) != 1 {
		t.Fatalf("openai: resp %+v, err %v", resp, err)
	}

	// Without a key the hosted default base is a config error naming the
	// variable.
	r2, err := providers.NewRouter(llm.Config{Model: "anthropic:claude-x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r2.Complete(t.Context(), llm.Call{Messages: userCall("hi").Messages}, nil)
	var be *bub.Error
	if !errors.As(err, &be) || be.Kind != bub.KindConfig || !strings.Contains(be.Message, "BUB_ANTHROPIC_API_KEY") {
		t.Errorf("err = %v, want a config error naming BUB_ANTHROPIC_API_KEY", err)
	}
}
