package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/bubbus/bub/pkg/bub"
)

// DetailedError is an error that carries structured details. When a
// handler's error implements it (or wraps one that does), [Invoke] adds
// the details to the normalized tool error, beside "error".
type DetailedError interface {
	error
	ErrorDetails() map[string]any
}

// Invoke validates args and runs t, normalizing every failure to a
// *bub.Error as Bub's tool executor does:
//
//   - a handler's *bub.Error passes through unchanged;
//   - invalid arguments give invalid_input "Tool '<name>' argument
//     validation failed." with details {"errors": [...]};
//   - a call without context to a tool that requires one gives
//     invalid_input "Tool '<name>' requires context but none was provided.";
//   - any other error, and a panic in the handler, give tool "Tool '<name>'
//     execution failed." with details {"error": <text>} plus the details
//     of a [DetailedError].
//
// <name> is the model-facing name, as hooks see it in [Call]. Hooks and
// events around the call are the caller's business. When ctx is done the
// result is a tool error carrying ctx's error; callers that must not
// observe cancellation check ctx.Err() first.
func Invoke(ctx context.Context, t Tool, tc *Context, args map[string]any) (result any, err *bub.Error) {
	name := t.ModelName()
	if t.Handler == nil {
		return nil, bub.Errorf(bub.KindTool, "Tool '%s' has no handler.", name)
	}
	if tc == nil {
		if t.RequiresContext {
			return nil, bub.Errorf(bub.KindInvalidInput, "Tool '%s' requires context but none was provided.", name)
		}
		tc = &Context{}
	}
	valid, verr := Validate(t, args)
	if verr != nil {
		return nil, bub.AsError(verr)
	}
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, executionFailed(name, fmt.Errorf("panic: %v", p))
		}
	}()
	out, herr := t.Handler(ctx, tc, valid)
	if herr != nil {
		return nil, executionFailed(name, herr)
	}
	return out, nil
}

func executionFailed(name string, err error) *bub.Error {
	var be *bub.Error
	if errors.As(err, &be) {
		return be
	}
	details := map[string]any{}
	var de DetailedError
	if errors.As(err, &de) {
		maps.Copy(details, de.ErrorDetails())
	}
	details["error"] = err.Error()
	return &bub.Error{Kind: bub.KindTool, Message: fmt.Sprintf("Tool '%s' execution failed.", name), Details: details}
}

// UnknownTool returns the placeholder Bub runs for a tool call whose
// model-facing name matches no tool: hooks still see the call (and the
// builtin before_tool_call may replace it with [UnknownToolGuidance]);
// if none does, it fails with tool "Unknown tool name: <name>.". It takes
// any arguments.
func UnknownTool(name string) Tool {
	return Tool{
		Name:       name,
		Parameters: map[string]any{"type": "object", "additionalProperties": true},
		Handler: func(context.Context, *Context, map[string]any) (any, error) {
			return nil, bub.Errorf(bub.KindTool, "Unknown tool name: %s.", name)
		},
	}
}

// RenderResult renders a tool result as text for the model (Bub's
// render_result): strings as they are, everything else as JSON without
// HTML escaping, or with fmt when it is not JSON-encodable.
func RenderResult(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
