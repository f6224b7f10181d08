package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message in the OpenAI chat-completions shape.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Content is a message body: plain text, or a list of content parts when
// Parts is non-nil (Bub's "prompt or content parts").
type Content struct {
	Text  string
	Parts []Part
}

// Text returns a plain-text content.
func Text(s string) Content { return Content{Text: s} }

// IsEmpty reports whether the content has no text and no parts (Bub's
// falsy prompt).
func (c Content) IsEmpty() bool {
	return c.Parts == nil && c.Text == "" || c.Parts != nil && len(c.Parts) == 0
}

// PlainText returns the text, or for a part list the text parts joined by
// newlines.
func (c Content) PlainText() string {
	if c.Parts == nil {
		return c.Text
	}
	var texts []string
	for _, p := range c.Parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// MarshalJSON encodes a JSON string, or an array of parts when Parts is set.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON accepts a string, an array of parts or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*c = Content{}
		return nil
	case b[0] == '"':
		*c = Content{}
		return json.Unmarshal(b, &c.Text)
	case b[0] == '[':
		var parts []Part
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		if parts == nil {
			parts = []Part{}
		}
		*c = Content{Parts: parts}
		return nil
	}
	return errors.New("llm: content must be a string, an array of parts or null")
}

// Part is one content part (text, image_url, video_url, input_audio).
type Part struct {
	Type       string     `json:"type"`
	Text       string     `json:"text,omitempty"`
	ImageURL   *URLPart   `json:"image_url,omitempty"`
	VideoURL   *URLPart   `json:"video_url,omitempty"`
	InputAudio *AudioPart `json:"input_audio,omitempty"`
}

// URLPart is the {url} object of an image_url or video_url part.
type URLPart struct {
	URL string `json:"url"`
}

// AudioPart is the {data, format} object of an input_audio part.
type AudioPart struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// ToolCall is one tool call requested by the model.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its raw JSON arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is the token usage of one provider call.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails carries the cached part of the prompt tokens.
// CacheWriteTokens (OpenRouter's name) counts the prompt tokens written to
// the provider's cache by this call, which Anthropic reports as
// cache_creation_input_tokens; 0 when the provider reports none.
type PromptTokensDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// ToolSchema describes a tool offered to the model.
type ToolSchema struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`

	encoded []byte // its JSON encoding, made once by Encoded
}

// Encoded returns s carrying its JSON encoding, made once here: encoding
// it (or a copy of it) again copies those bytes instead of walking
// Parameters and sorting their keys. It is for schemas offered on every
// model call, such as a frozen tool registry's, whose fields are never
// modified afterwards (a modified copy would still encode as s).
func (s ToolSchema) Encoded() ToolSchema {
	s.encoded = nil
	if b, err := json.Marshal(s); err == nil {
		s.encoded = b
	}
	return s
}

// MarshalJSON encodes s: the encoding [ToolSchema.Encoded] made, or else
// its fields.
func (s ToolSchema) MarshalJSON() ([]byte, error) {
	if s.encoded != nil {
		return s.encoded, nil
	}
	type fields ToolSchema // without this method
	return json.Marshal(fields(s))
}
