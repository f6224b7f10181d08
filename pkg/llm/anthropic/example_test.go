package anthropic_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/bubbus/bub/internal/fakeanthropic"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/anthropic"
)

// A call against the fake Messages API: the answer streams as deltas and
// comes back whole, with its usage.
func ExampleNew() {
	srv := httptest.NewServer(fakeanthropic.New(fakeanthropic.Script{Steps: []fakeanthropic.Step{{
		Text: "Hello from Claude", Usage: &fakeanthropic.Usage{InputTokens: 4, OutputTokens: 3, CacheReadInputTokens: 20},
	}}}))
	defer srv.Close()
	p, err := anthropic.New(anthropic.WithBaseURL(srv.URL), anthropic.WithAPIKey("sk-ant-example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := p.Complete(context.Background(), llm.Call{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: llm.Text("hi")}},
	}, func(d llm.Delta) { fmt.Printf("%s %q\n", d.Kind, d.Text) })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text, resp.Usage.PromptTokens, resp.Usage.PromptTokensDetails.CachedTokens)
	// Output:
	// text "Hello"
	// text " from "
	// text "Claude"
	// Hello from Claude 24 20
}
