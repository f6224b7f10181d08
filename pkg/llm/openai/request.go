package openai

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// Request body keys the provider manages.
const (
	keyModel               = "model"
	keyMessages            = "messages"
	keyTools               = "tools"
	keyMaxTokens           = "max_tokens"
	keyMaxCompletionTokens = "max_completion_tokens"
	keyStream              = "stream"
	keyStreamOptions       = "stream_options"
	keyReasoningEffort     = "reasoning_effort"
)

// tool is the wire form of a function tool.
type tool struct {
	Type     string         `json:"type"`
	Function llm.ToolSchema `json:"function"`
}

// requestBody builds the JSON body of call (precedence in Complete's doc).
func (p *Provider) requestBody(call llm.Call) ([]byte, error) {
	body := make(map[string]any, len(p.completionArgs)+8)
	maps.Copy(body, p.completionArgs)
	body[keyStreamOptions] = map[string]any{"include_usage": true}
	body[keyModel] = call.Model
	messages := call.Messages
	if messages == nil {
		messages = []llm.Message{}
	}
	body[keyMessages] = messages
	delete(body, keyTools)
	if len(call.Tools) > 0 {
		tools := make([]tool, len(call.Tools))
		for i, t := range call.Tools {
			if t.Parameters == nil {
				t.Parameters = map[string]any{"type": "object", "properties": map[string]any{}}
			}
			tools[i] = tool{Type: "function", Function: t}
		}
		body[keyTools] = tools
	}
	delete(body, keyMaxTokens)
	delete(body, keyMaxCompletionTokens)
	if call.MaxTokens > 0 {
		body[p.maxTokensKey] = call.MaxTokens
	}
	body[keyStream] = true
	if call.ReasoningEffort != "" {
		body[keyReasoningEffort] = call.ReasoningEffort
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, &bub.Error{
			Kind:    bub.KindInvalidInput,
			Message: fmt.Sprintf("encoding the request for provider %q: %v", p.name, err),
			Details: map[string]any{"provider": p.name, "model": call.Model},
		}
	}
	return b, nil
}
