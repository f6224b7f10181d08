package anthropic

import (
	"sync"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/bubbus/bub/pkg/llm"
)

// thinkingCacheSize bounds how many answers' thinking blocks a provider
// keeps.
const thinkingCacheSize = 1024

// thinkingCache keeps the thinking blocks of the answers that requested
// tool calls, by the id of their first tool call. With extended thinking
// the API needs them back, signature and all, in the assistant message of
// a tool loop, and Bub's OpenAI-shaped messages have no place for them.
type thinkingCache struct {
	limit int

	// mu guards the fields below.
	mu     sync.Mutex
	blocks map[string][]asdk.ContentBlockParamUnion
	order  []string // keys, oldest first
}

func newThinkingCache(limit int) *thinkingCache {
	return &thinkingCache{limit: limit, blocks: map[string][]asdk.ContentBlockParamUnion{}}
}

// remember keeps the thinking blocks of msg when it requested tool calls.
func (c *thinkingCache) remember(msg asdk.Message) {
	var (
		blocks []asdk.ContentBlockParamUnion
		key    string
	)
	for _, b := range msg.Content {
		switch b.Type {
		case "thinking":
			blocks = append(blocks, asdk.NewThinkingBlock(b.Signature, b.Thinking))
		case "redacted_thinking":
			blocks = append(blocks, asdk.NewRedactedThinkingBlock(b.Data))
		case "tool_use":
			if key == "" {
				key = b.ID
			}
		}
	}
	if key == "" || len(blocks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.blocks[key]; !ok {
		c.order = append(c.order, key)
	}
	c.blocks[key] = blocks
	for len(c.order) > c.limit {
		delete(c.blocks, c.order[0])
		c.order = c.order[1:]
	}
}

// blocksOf returns the thinking blocks of the answer that requested calls,
// nil when they are unknown.
func (c *thinkingCache) blocksOf(calls []llm.ToolCall) []asdk.ContentBlockParamUnion {
	if len(calls) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]asdk.ContentBlockParamUnion(nil), c.blocks[calls[0].ID]...)
}

// canThink reports whether a call over messages may turn thinking on: not
// when it continues a tool loop (the last assistant message, before the
// tool results and any user message after them, such as the agent's
// continue prompt, requested tools) whose thinking blocks this provider
// does not hold.
func (c *thinkingCache) canThink(messages []llm.Message) bool {
	for i := len(messages) - 1; i >= 0; i-- {
		switch m := messages[i]; m.Role {
		case llm.RoleTool, llm.RoleUser:
			continue
		case llm.RoleAssistant:
			return len(m.ToolCalls) == 0 || len(c.blocksOf(m.ToolCalls)) > 0
		default:
			return true
		}
	}
	return true
}
