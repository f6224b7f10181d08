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
	delete(body, keyTools) // appended below
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
	if err == nil && len(call.Tools) > 0 {
		b, err = appendTools(b, call.Tools)
	}
	if err != nil {
		return nil, &bub.Error{
			Kind:    bub.KindInvalidInput,
			Message: fmt.Sprintf("encoding the request for provider %q: %v", p.name, err),
			Details: map[string]any{"provider": p.name, "model": call.Model},
		}
	}
	return b, nil
}

// appendTools returns b, an encoded body with other members, with the
// tools member added: each schema as a function tool. A schema that
// carries its encoding (llm.ToolSchema.Encoded, as a frozen tool
// registry's do) is copied, not encoded again.
func appendTools(b []byte, schemas []llm.ToolSchema) ([]byte, error) {
	const fn = `{"type":"function","function":`
	encs := make([][]byte, len(schemas))
	n := len(b) + len(`,"tools":[]`)
	for i, t := range schemas {
		if t.Parameters == nil {
			t = llm.ToolSchema{Name: t.Name, Description: t.Description, Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}
		}
		var err error
		if encs[i], err = t.MarshalJSON(); err != nil {
			return nil, err
		}
		n += len(fn) + len(encs[i]) + len("},")
	}
	out := append(make([]byte, 0, n), b[:len(b)-1]...)
	out = append(out, `,"tools":[`...)
	for i, e := range encs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, fn...), e...), '}')
	}
	return append(out, "]}"...), nil
}
