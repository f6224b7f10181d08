package openai_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
)

// TestOpenRouterCacheWriteTokens (failed before its fix): OpenRouter (Bub's default
// provider, "openrouter:openrouter/free") reports prompt-cache writes as
// usage.prompt_tokens_details.cache_write_tokens in the last chunk. The
// OpenAI-compatible provider must keep them.
//
// Sequence: the stream's final chunk carries usage {prompt_tokens 194,
// completion_tokens 2, total_tokens 196, prompt_tokens_details
// {cached_tokens 0, cache_write_tokens 100}}. usageOf copies only
// cached_tokens, so Response.Usage.PromptTokensDetails.CacheWriteTokens is
// 0, although llm.PromptTokensDetails has the field precisely for
// "OpenRouter's name" (pkg/llm/message.go) and the SDK decodes it
// (CompletionUsagePromptTokensDetails.CacheWriteTokens).
//
// Expected: CacheWriteTokens 100 (bub-behaviour.md §5.5: usage taken from
// the chunk that has it; behaviour check 45: that usage is what the run
// event stores — Python stores the usage map whole).
func TestOpenRouterCacheWriteTokens(t *testing.T) {
	_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Raw: []json.RawMessage{
		raw(`{"choices":[{"index":0,"delta":{"content":"ok"}}]}`),
		raw(`{"choices":[],"usage":{"prompt_tokens":194,"completion_tokens":2,"total_tokens":196,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":100,"audio_tokens":0}}}`),
	}}}})
	resp, _ := collect(t, newProvider(t, base), userCall("hi"))
	if resp.Usage == nil || resp.Usage.PromptTokensDetails == nil {
		t.Fatalf("usage = %+v, want prompt_tokens_details", resp.Usage)
	}
	if got := resp.Usage.PromptTokensDetails.CacheWriteTokens; got != 100 {
		t.Fatalf("cache_write_tokens = %d, want 100 (usage %+v, details %+v)", got, resp.Usage, resp.Usage.PromptTokensDetails)
	}
}

// TestDoneReturnsPromptly (failed before its fix): once "data: [DONE]" arrived the answer is
// complete; Complete must not wait for the server to end the response.
//
// Sequence: the server streams "hello", then "data: [DONE]", flushes, and
// keeps the HTTP/1.1 response open (a proxy that ends its chunked body
// late, or only after post-processing). The SDK stops at [DONE] and closes
// the body; drainOnClose.Close then reads up to 4 KiB from the body before
// closing it, blocking until the server ends the response.
//
// Expected: Complete returns "hello" right after [DONE] (well under a
// second); before the fix it returned only when the server closed the response (3 s
// here; never, without a model timeout, for a server that never does).
func TestDoneReturnsPromptly(t *testing.T) {
	const hold = 3 * time.Second
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(hold):
		}
	}))
	t.Cleanup(ts.Close)
	start := time.Now()
	resp, _ := collect(t, newProvider(t, ts.URL+"/v1"), userCall("hi"))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Complete returned %v after [DONE] (text %q): it waited for the server to end the response", took, resp.Text)
	}
	if resp.Text != "hello" {
		t.Fatalf("text = %q", resp.Text)
	}
}
