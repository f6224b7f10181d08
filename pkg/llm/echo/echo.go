package echo

import (
	"context"
	"strings"

	"github.com/bubbus/bub/pkg/llm"
)

// Name is the provider name the echo model is registered under, so its
// model string is "echo:<anything>".
const Name = "echo"

// maxDeltas is how many text deltas a reply is streamed in, at most.
const maxDeltas = 3

// Provider is the echo model. The zero value is ready to use.
type Provider struct{}

var _ llm.Provider = Provider{}

// New returns the echo model.
func New() Provider { return Provider{} }

// Complete answers with the plain text of the last user message, streamed
// in up to three text deltas split at spaces (their concatenation is the
// text). Usage counts whitespace-separated words: the prompt tokens over
// every message, the completion tokens over the reply. A cancelled ctx
// returns ctx's error.
func (Provider) Complete(ctx context.Context, call llm.Call, onDelta func(llm.Delta)) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	text := lastUserText(call.Messages)
	for _, piece := range split(text, maxDeltas) {
		if err := ctx.Err(); err != nil {
			return llm.Response{}, err
		}
		if onDelta != nil {
			onDelta(llm.Delta{Kind: llm.DeltaText, Text: piece})
		}
	}
	prompt := 0
	for _, m := range call.Messages {
		prompt += words(m.Content.PlainText())
	}
	completion := words(text)
	return llm.Response{
		Text: text,
		Usage: &llm.Usage{
			PromptTokens:     prompt,
			CompletionTokens: completion,
			TotalTokens:      prompt + completion,
		},
	}, nil
}

// lastUserText returns the plain text of the last user message, "" when
// there is none.
func lastUserText(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i].Content.PlainText()
		}
	}
	return ""
}

// split cuts text after spaces into at most n pieces of about equal word
// counts; joined they are text.
func split(text string, n int) []string {
	if text == "" {
		return nil
	}
	tokens := strings.SplitAfter(text, " ")
	size := (len(tokens) + n - 1) / n
	var pieces []string
	for len(tokens) > 0 {
		k := min(size, len(tokens))
		pieces = append(pieces, strings.Join(tokens[:k], ""))
		tokens = tokens[k:]
	}
	return pieces
}

func words(s string) int { return len(strings.Fields(s)) }
