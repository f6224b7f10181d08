package remote

import (
	"strconv"

	"github.com/bubbus/bub/pkg/llm"
)

// The inputs of before_llm_call and after_llm_call carry the whole model
// context (every message of the run so far), twice per model call: they
// are written here without reflection, as encoding/json would write them
// (HTML characters unescaped, as in the rest of this encoder).

func (in *BeforeLLMCallInput) encode(b []byte) ([]byte, error) {
	b = append(b, `{"request":`...)
	b = appendLLMRequest(b, &in.Request)
	return append(b, '}'), nil
}

func (in *AfterLLMCallInput) encode(b []byte) ([]byte, error) {
	b = append(b, `{"request":`...)
	b = appendLLMRequest(b, &in.Request)
	b = append(b, `,"result":`...)
	b, err := appendLLMResult(b, &in.Result)
	return append(b, '}'), err
}

func appendLLMRequest(b []byte, r *llm.Request) []byte {
	b = append(b, `{"run_id":`...)
	b = appendString(b, r.RunID)
	b = append(b, `,"model":`...)
	b = appendString(b, r.Model)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMessage(b, &r.Messages[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"tool_names":`...)
	if r.ToolNames == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, n := range r.ToolNames {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
		}
		b = append(b, ']')
	}
	if r.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
	}
	return append(b, '}')
}

func appendMessage(b []byte, m *llm.Message) []byte {
	b = append(b, `{"role":`...)
	b = appendString(b, m.Role)
	b = append(b, `,"content":`...)
	b = appendContent(b, &m.Content)
	b = appendToolCalls(b, m.ToolCalls)
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendString(b, m.ToolCallID)
	}
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, m.Name)
	}
	return append(b, '}')
}

// appendContent writes c as llm.Content.MarshalJSON does: the part list
// when there is one (also an empty one), the text otherwise.
func appendContent(b []byte, c *llm.Content) []byte {
	if c.Parts == nil {
		return appendString(b, c.Text)
	}
	b = append(b, '[')
	for i := range c.Parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPart(b, &c.Parts[i])
	}
	return append(b, ']')
}

func appendPart(b []byte, p *llm.Part) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, p.Type)
	if p.Text != "" {
		b = append(b, `,"text":`...)
		b = appendString(b, p.Text)
	}
	for _, u := range []struct {
		key string
		url *llm.URLPart
	}{{`,"image_url":`, p.ImageURL}, {`,"video_url":`, p.VideoURL}} {
		if u.url != nil {
			b = append(b, u.key...)
			b = append(b, `{"url":`...)
			b = appendString(b, u.url.URL)
			b = append(b, '}')
		}
	}
	if a := p.InputAudio; a != nil {
		b = append(b, `,"input_audio":{"data":`...)
		b = appendString(b, a.Data)
		b = append(b, `,"format":`...)
		b = appendString(b, a.Format)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendToolCalls writes a "tool_calls" member when there are any
// (omitempty).
func appendToolCalls(b []byte, calls []llm.ToolCall) []byte {
	if len(calls) == 0 {
		return b
	}
	b = append(b, `,"tool_calls":[`...)
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, c.ID)
		b = append(b, `,"type":`...)
		b = appendString(b, c.Type)
		b = append(b, `,"function":{"name":`...)
		b = appendString(b, c.Function.Name)
		b = append(b, `,"arguments":`...)
		b = appendString(b, c.Function.Arguments)
		b = append(b, "}}"...)
	}
	return append(b, ']')
}

func appendLLMResult(b []byte, r *LLMResult) ([]byte, error) {
	b = append(b, `{"run_id":`...)
	b = appendString(b, r.RunID)
	if r.Text != "" {
		b = append(b, `,"text":`...)
		b = appendString(b, r.Text)
	}
	b = appendToolCalls(b, r.ToolCalls)
	if u := r.Usage; u != nil {
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
		if d := u.PromptTokensDetails; d != nil {
			b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
			b = strconv.AppendInt(b, int64(d.CachedTokens), 10)
			if d.CacheWriteTokens != 0 {
				b = append(b, `,"cache_write_tokens":`...)
				b = strconv.AppendInt(b, int64(d.CacheWriteTokens), 10)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, r.DurationMS, 10)
	if e := r.Error; e != nil {
		b = append(b, `,"error":{"kind":`...)
		b = appendString(b, string(e.Kind))
		b = append(b, `,"message":`...)
		b = appendString(b, e.Message)
		if len(e.Details) > 0 {
			b = append(b, `,"details":`...)
			var err error
			if b, err = appendValue(b, e.Details); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}
