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
	b = appendArray(b, r.Messages, appendMessage)
	b = append(b, `,"tool_names":`...)
	b = appendArray(b, r.ToolNames, func(b []byte, s *string) []byte { return appendString(b, *s) })
	if r.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
	}
	return append(b, '}')
}

// appendArray writes xs as a JSON array, each element with each; nil is
// null, as encoding/json writes a nil slice.
func appendArray[E any](b []byte, xs []E, each func([]byte, *E) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, &xs[i])
	}
	return append(b, ']')
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
	return appendArray(b, c.Parts, appendPart)
}

func appendPart(b []byte, p *llm.Part) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, p.Type)
	if p.Text != "" {
		b = append(b, `,"text":`...)
		b = appendString(b, p.Text)
	}
	b = appendURL(b, `,"image_url":`, p.ImageURL)
	b = appendURL(b, `,"video_url":`, p.VideoURL)
	if a := p.InputAudio; a != nil {
		b = append(b, `,"input_audio":{"data":`...)
		b = appendString(b, a.Data)
		b = append(b, `,"format":`...)
		b = appendString(b, a.Format)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendURL writes member (`,"<name>":`) with u, nothing for nil
// (omitempty).
func appendURL(b []byte, member string, u *llm.URLPart) []byte {
	if u == nil {
		return b
	}
	b = append(b, member...)
	b = append(b, `{"url":`...)
	b = appendString(b, u.URL)
	return append(b, '}')
}

// appendToolCalls writes a "tool_calls" member when there are any
// (omitempty).
func appendToolCalls(b []byte, calls []llm.ToolCall) []byte {
	if len(calls) == 0 {
		return b
	}
	b = append(b, `,"tool_calls":`...)
	return appendArray(b, calls, func(b []byte, c *llm.ToolCall) []byte {
		b = append(b, `{"id":`...)
		b = appendString(b, c.ID)
		b = append(b, `,"type":`...)
		b = appendString(b, c.Type)
		b = append(b, `,"function":{"name":`...)
		b = appendString(b, c.Function.Name)
		b = append(b, `,"arguments":`...)
		b = appendString(b, c.Function.Arguments)
		return append(b, "}}"...)
	})
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
// encoders above write, in the parser's single pass, into exactly what
// encoding/json decodes from it, with a table of [members] per type
// (object.go). Unlike encoding/json, a member given twice is decoded
// afresh rather than merged into the first.

func (in *BeforeLLMCallInput) decode(p *parser) error { return beforeMembers.decode(p, in) }

func (in *AfterLLMCallInput) decode(p *parser) error { return afterMembers.decode(p, in) }

var (
	beforeMembers = members[BeforeLLMCallInput]{
		"request": object(func(in *BeforeLLMCallInput) *llm.Request { return &in.Request }, requestMembers),
	}
	afterMembers = members[AfterLLMCallInput]{
		"request": object(func(in *AfterLLMCallInput) *llm.Request { return &in.Request }, requestMembers),
		"result":  object(func(in *AfterLLMCallInput) *LLMResult { return &in.Result }, resultMembers),
	}
	requestMembers = members[llm.Request]{
		"run_id":     text(func(r *llm.Request) *string { return &r.RunID }),
		"model":      text(func(r *llm.Request) *string { return &r.Model }),
		"messages":   list(func(r *llm.Request) *[]llm.Message { return &r.Messages }, messageMembers.decode),
		"tool_names": list(func(r *llm.Request) *[]string { return &r.ToolNames }, decodeString),
		"max_tokens": integer(func(r *llm.Request) *int { return &r.MaxTokens }),
	}
	messageMembers = members[llm.Message]{
		"role":         text(func(m *llm.Message) *string { return &m.Role }),
		"content":      func(p *parser, m *llm.Message) error { return decodeContent(p, &m.Content) },
		"tool_calls":   list(func(m *llm.Message) *[]llm.ToolCall { return &m.ToolCalls }, toolCallMembers.decode),
		"tool_call_id": text(func(m *llm.Message) *string { return &m.ToolCallID }),
		"name":         text(func(m *llm.Message) *string { return &m.Name }),
	}
	partMembers = members[llm.Part]{
		"type":        text(func(p *llm.Part) *string { return &p.Type }),
		"text":        text(func(p *llm.Part) *string { return &p.Text }),
		"image_url":   nullable(func(p *llm.Part) **llm.URLPart { return &p.ImageURL }, urlMembers),
		"video_url":   nullable(func(p *llm.Part) **llm.URLPart { return &p.VideoURL }, urlMembers),
		"input_audio": nullable(func(p *llm.Part) **llm.AudioPart { return &p.InputAudio }, audioMembers),
	}
	urlMembers = members[llm.URLPart]{
		"url": text(func(u *llm.URLPart) *string { return &u.URL }),
	}
	audioMembers = members[llm.AudioPart]{
		"data":   text(func(a *llm.AudioPart) *string { return &a.Data }),
		"format": text(func(a *llm.AudioPart) *string { return &a.Format }),
	}
	toolCallMembers = members[llm.ToolCall]{
		"id":       text(func(c *llm.ToolCall) *string { return &c.ID }),
		"type":     text(func(c *llm.ToolCall) *string { return &c.Type }),
		"function": object(func(c *llm.ToolCall) *llm.FunctionCall { return &c.Function }, functionMembers),
	}
	functionMembers = members[llm.FunctionCall]{
		"name":      text(func(f *llm.FunctionCall) *string { return &f.Name }),
		"arguments": text(func(f *llm.FunctionCall) *string { return &f.Arguments }),
	}
	resultMembers = members[LLMResult]{
		"run_id":      text(func(r *LLMResult) *string { return &r.RunID }),
		"text":        text(func(r *LLMResult) *string { return &r.Text }),
		"tool_calls":  list(func(r *LLMResult) *[]llm.ToolCall { return &r.ToolCalls }, toolCallMembers.decode),
		"usage":       nullable(func(r *LLMResult) **llm.Usage { return &r.Usage }, usageMembers),
		"duration_ms": integer(func(r *LLMResult) *int64 { return &r.DurationMS }),
		"error":       nullable(func(r *LLMResult) **ErrorBody { return &r.Error }, errorMembers),
	}
	usageMembers = members[llm.Usage]{
		"prompt_tokens":         integer(func(u *llm.Usage) *int { return &u.PromptTokens }),
		"completion_tokens":     integer(func(u *llm.Usage) *int { return &u.CompletionTokens }),
		"total_tokens":          integer(func(u *llm.Usage) *int { return &u.TotalTokens }),
		"prompt_tokens_details": nullable(func(u *llm.Usage) **llm.PromptTokensDetails { return &u.PromptTokensDetails }, detailsMembers),
	}
	detailsMembers = members[llm.PromptTokensDetails]{
		"cached_tokens":      integer(func(d *llm.PromptTokensDetails) *int { return &d.CachedTokens }),
		"cache_write_tokens": integer(func(d *llm.PromptTokensDetails) *int { return &d.CacheWriteTokens }),
	}
	contentParts = list(func(c *llm.Content) *[]llm.Part { return &c.Parts }, partMembers.decode)
	errorMembers = members[ErrorBody]{
		"kind":    text(func(e *ErrorBody) *bub.Kind { return &e.Kind }),
		"message": text(func(e *ErrorBody) *string { return &e.Message }),
		"details": anyObject(func(e *ErrorBody) *map[string]any { return &e.Details }),
	}
)

// decodeContent reads what llm.Content.UnmarshalJSON accepts: a string,
// a part list or null.
func decodeContent(p *parser, c *llm.Content) error {
	*c = llm.Content{}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '[':
		return contentParts(p, c)
	case p.i < len(p.data) && p.data[p.i] == '"':
		var err error
		c.Text, err = p.string()
		return err
	case p.literal("null"):
		return nil
	}
	return errSyntax
}
