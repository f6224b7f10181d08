package remote

import (
	"strconv"

	"github.com/bubbus/bub/pkg/bub"
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

// The decoders below are the interceptor's side: they read what the
// encoders above write, in the parser's single pass (object.go), into
// exactly what encoding/json decodes from it. Unlike encoding/json, a
// member given twice is decoded afresh rather than merged into the first.

func (in *BeforeLLMCallInput) decode(p *parser) error {
	return p.members(func(p *parser, key []byte) error {
		if string(key) != "request" {
			return p.skip(0)
		}
		return decodeLLMRequest(p, &in.Request)
	})
}

func (in *AfterLLMCallInput) decode(p *parser) error {
	return p.members(func(p *parser, key []byte) error {
		switch string(key) {
		case "request":
			return decodeLLMRequest(p, &in.Request)
		case "result":
			return decodeLLMResult(p, &in.Result)
		}
		return p.skip(0)
	})
}

func decodeLLMRequest(p *parser, r *llm.Request) error {
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "run_id":
			r.RunID, err = p.stringOrNull()
		case "model":
			r.Model, err = p.stringOrNull()
		case "messages":
			r.Messages, err = list(p, decodeMessage)
		case "tool_names":
			r.ToolNames, err = list(p, func(p *parser, s *string) (err error) {
				*s, err = p.stringOrNull()
				return err
			})
		case "max_tokens":
			r.MaxTokens, err = p.int()
		default:
			err = p.skip(0)
		}
		return err
	})
}

func decodeMessage(p *parser, m *llm.Message) error {
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "role":
			m.Role, err = p.stringOrNull()
		case "content":
			err = decodeContent(p, &m.Content)
		case "tool_calls":
			m.ToolCalls, err = list(p, decodeToolCall)
		case "tool_call_id":
			m.ToolCallID, err = p.stringOrNull()
		case "name":
			m.Name, err = p.stringOrNull()
		default:
			err = p.skip(0)
		}
		return err
	})
}

// decodeContent reads what llm.Content.UnmarshalJSON accepts: a string,
// a part list or null.
func decodeContent(p *parser, c *llm.Content) (err error) {
	*c = llm.Content{}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '[':
		c.Parts, err = list(p, decodePart)
	case p.i < len(p.data) && p.data[p.i] == '"':
		c.Text, err = p.string()
	case !p.literal("null"):
		err = errSyntax
	}
	return err
}

func decodePart(p *parser, part *llm.Part) error {
	url := func(p *parser, u **llm.URLPart) error {
		if p.literal("null") {
			*u = nil
			return nil
		}
		*u = &llm.URLPart{}
		return p.members(func(p *parser, key []byte) (err error) {
			if string(key) != "url" {
				return p.skip(0)
			}
			(*u).URL, err = p.stringOrNull()
			return err
		})
	}
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "type":
			part.Type, err = p.stringOrNull()
		case "text":
			part.Text, err = p.stringOrNull()
		case "image_url":
			err = url(p, &part.ImageURL)
		case "video_url":
			err = url(p, &part.VideoURL)
		case "input_audio":
			if p.literal("null") {
				part.InputAudio = nil
				return nil
			}
			a := &llm.AudioPart{}
			part.InputAudio = a
			err = p.members(func(p *parser, key []byte) (err error) {
				switch string(key) {
				case "data":
					a.Data, err = p.stringOrNull()
				case "format":
					a.Format, err = p.stringOrNull()
				default:
					err = p.skip(0)
				}
				return err
			})
		default:
			err = p.skip(0)
		}
		return err
	})
}

func decodeToolCall(p *parser, c *llm.ToolCall) error {
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "id":
			c.ID, err = p.stringOrNull()
		case "type":
			c.Type, err = p.stringOrNull()
		case "function":
			err = p.members(func(p *parser, key []byte) (err error) {
				switch string(key) {
				case "name":
					c.Function.Name, err = p.stringOrNull()
				case "arguments":
					c.Function.Arguments, err = p.stringOrNull()
				default:
					err = p.skip(0)
				}
				return err
			})
		default:
			err = p.skip(0)
		}
		return err
	})
}

func decodeLLMResult(p *parser, r *LLMResult) error {
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "run_id":
			r.RunID, err = p.stringOrNull()
		case "text":
			r.Text, err = p.stringOrNull()
		case "tool_calls":
			r.ToolCalls, err = list(p, decodeToolCall)
		case "usage":
			err = decodeUsage(p, &r.Usage)
		case "duration_ms":
			r.DurationMS, err = p.integer()
		case "error":
			err = decodeErrorBody(p, &r.Error)
		default:
			err = p.skip(0)
		}
		return err
	})
}

func decodeUsage(p *parser, u **llm.Usage) error {
	if p.literal("null") {
		*u = nil
		return nil
	}
	*u = &llm.Usage{}
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "prompt_tokens":
			(*u).PromptTokens, err = p.int()
		case "completion_tokens":
			(*u).CompletionTokens, err = p.int()
		case "total_tokens":
			(*u).TotalTokens, err = p.int()
		case "prompt_tokens_details":
			if p.literal("null") {
				(*u).PromptTokensDetails = nil
				return nil
			}
			d := &llm.PromptTokensDetails{}
			(*u).PromptTokensDetails = d
			err = p.members(func(p *parser, key []byte) (err error) {
				switch string(key) {
				case "cached_tokens":
					d.CachedTokens, err = p.int()
				case "cache_write_tokens":
					d.CacheWriteTokens, err = p.int()
				default:
					err = p.skip(0)
				}
				return err
			})
		default:
			err = p.skip(0)
		}
		return err
	})
}

func decodeErrorBody(p *parser, e **ErrorBody) error {
	if p.literal("null") {
		*e = nil
		return nil
	}
	*e = &ErrorBody{}
	return p.members(func(p *parser, key []byte) (err error) {
		switch string(key) {
		case "kind":
			var s string
			s, err = p.stringOrNull()
			(*e).Kind = bub.Kind(s)
		case "message":
			(*e).Message, err = p.stringOrNull()
		case "details":
			(*e).Details, err = p.objectOrNull()
		default:
			err = p.skip(0)
		}
		return err
	})
}

// list decodes an array of T (null is nil, [] an empty list), each
// element with each.
func list[T any](p *parser, each func(p *parser, v *T) error) ([]T, error) {
	if p.literal("null") {
		return nil, nil
	}
	if p.i >= len(p.data) || p.data[p.i] != '[' {
		return nil, errSyntax
	}
	out := []T{}
	err := p.elements(']', func([]byte) error {
		p.space()
		var v T
		err := each(p, &v)
		out = append(out, v)
		return err
	})
	return out, err
}
