package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

// toolName returns the runtime name of a server's tool: mcp.<server>_<tool>
// (the model sees mcp_<server>_<tool>).
func toolName(server, tool string) string { return "mcp." + server + "_" + tool }

// Effect returns the effect class MCP tool annotations declare:
// ReadOnlyHint is [tools.EffectReadOnly], else IdempotentHint is
// [tools.EffectIdempotent], else (no annotations included) the tool is
// [tools.EffectIrreversible].
func Effect(a *mcp.ToolAnnotations) tools.Effect {
	switch {
	case a == nil:
		return tools.EffectIrreversible
	case a.ReadOnlyHint:
		return tools.EffectReadOnly
	case a.IdempotentHint:
		return tools.EffectIdempotent
	}
	return tools.EffectIrreversible
}

func description(t *mcp.Tool) string {
	switch {
	case t.Description != "":
		return t.Description
	case t.Title != "":
		return t.Title
	case t.Annotations != nil:
		return t.Annotations.Title
	}
	return ""
}

// bubTools returns the registered form of the tools the first session
// listed.
func (s *server) bubTools() []tools.Tool {
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	out := make([]tools.Tool, 0, len(listed))
	for _, t := range listed {
		out = append(out, tools.Tool{
			Name:        toolName(s.cfg.Name, t.Name),
			Description: description(t),
			Parameters:  inputSchema(t.InputSchema),
			Effect:      Effect(t.Annotations),
			Handler: func(ctx context.Context, _ *tools.Context, args map[string]any) (any, error) {
				return s.call(ctx, t.Name, args)
			},
		})
	}
	return out
}

// inputSchema returns a tool's input schema as a JSON object (a copy; nil
// when it is none, which the registry reads as no parameters).
func inputSchema(schema any) map[string]any {
	data, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// call runs a tool on the server's live session. A server that is down,
// or a call that finds the connection broken, is a temporary tool error
// naming the server (the supervisor reconnects meanwhile); a JSON-RPC
// error or a result flagged isError is a tool error with the server's
// message.
func (s *server) call(ctx context.Context, name string, args map[string]any) (any, error) {
	cs, reason := s.current()
	if cs == nil {
		return nil, s.unavailable(reason)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rpc, ok := serverError(err); ok {
			return nil, fmt.Errorf("mcp server %q: %s", s.cfg.Name, s.hide.Replace(rpc.Message))
		}
		return nil, s.unavailable(s.broken(cs, err))
	}
	text := s.hide.Replace(contentText(res.Content)) // a server echoing its own token
	if res.IsError {
		if text == "" {
			text = "the tool reported an error"
		}
		return nil, fmt.Errorf("mcp server %q: %s", s.cfg.Name, text)
	}
	if text == "" && res.StructuredContent != nil {
		return res.StructuredContent, nil
	}
	return text, nil
}

// The SDK's own JSON-RPC codes (its internal jsonrpc2 package) for a
// request that never reached the server: the client or the server was
// closing, or the transport rejected it (an HTTP request that failed, a
// 502/503/504/429 answer).
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// serverError returns the JSON-RPC error the server answered a call with;
// false when err is a transport failure instead.
func serverError(err error) (*jsonrpc.Error, bool) {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) {
		return nil, false
	}
	switch rpc.Code {
	case codeClientClosing, codeServerClosing, codeRejected:
		return nil, false
	}
	return rpc, true
}

func (s *server) unavailable(reason string) *bub.Error {
	return &bub.Error{
		Kind:    bub.KindTemporary,
		Message: fmt.Sprintf("MCP server '%s' is unavailable (%s); it is being reconnected, try again later.", s.cfg.Name, reason),
		Details: map[string]any{"server": s.cfg.Name},
	}
}

// contentText renders a result's content as text: text as it is, other
// content as a short placeholder, one item a line.
func contentText(content []mcp.Content) string {
	parts := make([]string, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, "[resource "+c.URI+"]")
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, "[resource "+c.Resource.URI+"]")
			}
		}
	}
	return strings.Join(parts, "\n")
}
