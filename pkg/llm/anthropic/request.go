package anthropic

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/llm"
)

// managedKeys are the request fields the provider sets; completion args
// never override them. stream_options is OpenAI's and is dropped.
var managedKeys = []string{"model", "messages", "system", "tools", "max_tokens", "stream", "stream_options", "cache_control"}

// Keys of the completion args with a meaning of their own.
const (
	keyThinking        = "thinking"
	keyReasoningEffort = "reasoning_effort"
)

// thinkingBudgets maps a reasoning effort to an extended-thinking budget.
var thinkingBudgets = map[string]int{
	"minimal": 1024,
	"low":     2048,
	"medium":  8192,
	"high":    24576,
	"xhigh":   32768,
	"max":     32768,
}

// minThinkingBudget is the smallest budget_tokens the API accepts.
const minThinkingBudget = 1024

// ephemeral is the cache_control Bub sets.
var ephemeral = asdk.NewCacheControlEphemeralParam()

// params builds the request of call (see Complete's doc).
func (p *Provider) params(call llm.Call) (asdk.MessageNewParams, error) {
	invalid := func(format string, args ...any) error {
		return &bub.Error{
			Kind:    bub.KindInvalidInput,
			Message: fmt.Sprintf("provider %s model %s: ", p.name, call.Model) + fmt.Sprintf(format, args...),
			Details: map[string]any{"provider": p.name, "model": call.Model},
		}
	}
	params := asdk.MessageNewParams{
		Model:        asdk.Model(call.Model),
		MaxTokens:    int64(call.MaxTokens),
		CacheControl: ephemeral,
	}
	if params.MaxTokens <= 0 {
		params.MaxTokens = llm.DefaultMaxTokens
	}
	system, messages, err := p.convertMessages(call.Messages)
	if err != nil {
		return params, invalid("%v", err)
	}
	params.System, params.Messages = system, messages
	params.Tools = tools(call.Tools)

	extras := make(map[string]any, len(p.completionArgs))
	maps.Copy(extras, p.completionArgs)
	for _, key := range managedKeys {
		delete(extras, key)
	}
	effort := call.ReasoningEffort
	if effort == "" {
		if s, ok := extras[keyReasoningEffort].(string); ok {
			effort = s
		}
	}
	delete(extras, keyReasoningEffort)
	if effort != "" {
		delete(extras, keyThinking)
		budget, ok := thinkingBudgets[effort]
		switch {
		case effort == "none":
		case !ok:
			return params, invalid("reasoning effort %q is not one of none, %s", effort, strings.Join(slices.Sorted(maps.Keys(thinkingBudgets)), ", "))
		case params.MaxTokens <= minThinkingBudget:
			return params, invalid("reasoning effort %q needs max_tokens above %d, got %d", effort, minThinkingBudget, params.MaxTokens)
		case !p.thinking.canThink(call.Messages):
			// A tool loop whose thinking blocks are unknown: see Complete.
		default:
			params.Thinking = asdk.ThinkingConfigParamOfEnabled(min(int64(budget), params.MaxTokens-1))
		}
	}
	if len(extras) > 0 {
		params.SetExtraFields(extras)
	}
	return params, nil
}

// convertMessages splits Bub's messages into the system blocks and the
// Anthropic messages.
func (p *Provider) convertMessages(in []llm.Message) ([]asdk.TextBlockParam, []asdk.MessageParam, error) {
	var (
		system []asdk.TextBlockParam
		out    []asdk.MessageParam
	)
	for i, m := range in {
		switch m.Role {
		case llm.RoleSystem:
			if text := m.Content.PlainText(); text != "" {
				system = append(system, asdk.TextBlockParam{Text: text})
			}
		case llm.RoleUser:
			blocks, err := contentBlocks(m.Content)
			if err != nil {
				return nil, nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			if len(blocks) > 0 {
				out = append(out, asdk.NewUserMessage(blocks...))
			}
		case llm.RoleAssistant:
			blocks := p.thinking.blocksOf(m.ToolCalls)
			if text := m.Content.PlainText(); text != "" {
				blocks = append(blocks, asdk.NewTextBlock(text))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, asdk.NewToolUseBlock(tc.ID, toolInput(tc.Function.Arguments), tc.Function.Name))
			}
			if len(blocks) > 0 {
				out = append(out, asdk.NewAssistantMessage(blocks...))
			}
		case llm.RoleTool:
			result := toolResult(m)
			if n := len(out); i > 0 && in[i-1].Role == llm.RoleTool && n > 0 {
				out[n-1].OfUser.Content = append(out[n-1].OfUser.Content, result)
			} else {
				out = append(out, asdk.NewUserMessage(result))
			}
		default:
			return nil, nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if n := len(system); n > 0 {
		system[n-1].CacheControl = ephemeral
	}
	return system, out, nil
}

// toolResult is the tool_result block of a tool message; empty content is
// left out, as the API refuses an empty text block.
func toolResult(m llm.Message) asdk.ContentBlockParamUnion {
	block := asdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if text := m.Content.PlainText(); text != "" {
		block.Content = []asdk.ToolResultBlockParamContentUnion{{OfText: &asdk.TextBlockParam{Text: text}}}
	}
	return asdk.ContentBlockParamUnion{OfToolResult: &block}
}

// contentBlocks converts a user message's content.
func contentBlocks(c llm.Content) ([]asdk.ContentBlockParamUnion, error) {
	if c.Parts == nil {
		if c.Text == "" {
			return nil, nil
		}
		return []asdk.ContentBlockParamUnion{asdk.NewTextBlock(c.Text)}, nil
	}
	var blocks []asdk.ContentBlockParamUnion
	for j, part := range c.Parts {
		switch {
		case part.Type == "text":
			if part.Text != "" {
				blocks = append(blocks, asdk.NewTextBlock(part.Text))
			}
		case part.Type == "image_url" && part.ImageURL != nil:
			blocks = append(blocks, imageBlock(part.ImageURL.URL))
		default:
			return nil, fmt.Errorf("content part %d: Anthropic takes text and image parts, not %q", j, part.Type)
		}
	}
	return blocks, nil
}

// imageBlock sends a data: URL as base64 and any other URL as a URL source.
func imageBlock(u string) asdk.ContentBlockParamUnion {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok && strings.HasSuffix(meta, ";base64") {
			return asdk.NewImageBlockBase64(strings.TrimSuffix(meta, ";base64"), data)
		}
	}
	return asdk.NewImageBlock(asdk.URLImageSourceParam{URL: u})
}

// toolInput returns arguments as a JSON object, {} when they are not one.
func toolInput(arguments string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(arguments), &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(arguments)
}

// tools converts the tool schemas; the last one carries the cache
// breakpoint.
func tools(schemas []llm.ToolSchema) []asdk.ToolUnionParam {
	var out []asdk.ToolUnionParam
	for i, s := range schemas {
		schema := asdk.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for key, v := range s.Parameters {
			switch key {
			case "type":
			case "properties":
				schema.Properties = v
			case "required":
				schema.Required = stringList(v)
			default:
				schema.ExtraFields[key] = v
			}
		}
		if schema.Properties == nil {
			schema.Properties = map[string]any{}
		}
		tool := asdk.ToolParam{Name: s.Name, InputSchema: schema}
		if s.Description != "" {
			tool.Description = asdk.String(s.Description)
		}
		if i == len(schemas)-1 {
			tool.CacheControl = ephemeral
		}
		out = append(out, asdk.ToolUnionParam{OfTool: &tool})
	}
	return out
}

// stringList reads a JSON-schema "required" list ([]string or []any).
func stringList(v any) []string {
	switch list := v.(type) {
	case []string:
		return list
	case []any:
		var out []string
		for _, item := range list {
			if s, ok := item.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
