package tools_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

type exitError struct{ code int }

func (e *exitError) Error() string                { return fmt.Sprintf("exited with %d", e.code) }
func (e *exitError) ErrorDetails() map[string]any { return map[string]any{"exit_code": e.code} }

func TestInvokeNormalizesErrors(t *testing.T) {
	own := &bub.Error{Kind: bub.KindNotFound, Message: "no such anchor", Details: map[string]any{"name": "x"}}
	params := obj(map[string]any{"n": map[string]any{"type": "integer"}})
	tests := []struct {
		name    string
		handler tools.Handler
		args    map[string]any
		want    *bub.Error
	}{
		{
			name:    "bub error passes through",
			handler: func(context.Context, *tools.Context, map[string]any) (any, error) { return nil, own },
			want:    own,
		},
		{
			name: "wrapped bub error passes through",
			handler: func(context.Context, *tools.Context, map[string]any) (any, error) {
				return nil, fmt.Errorf("reading: %w", own)
			},
			want: own,
		},
		{
			name:    "plain error",
			handler: func(context.Context, *tools.Context, map[string]any) (any, error) { return nil, errors.New("boom") },
			want:    &bub.Error{Kind: bub.KindTool, Message: "Tool 'test_tool' execution failed.", Details: map[string]any{"error": "boom"}},
		},
		{
			name: "detailed error",
			handler: func(context.Context, *tools.Context, map[string]any) (any, error) {
				return nil, fmt.Errorf("run: %w", &exitError{7})
			},
			want: &bub.Error{Kind: bub.KindTool, Message: "Tool 'test_tool' execution failed.", Details: map[string]any{"error": "run: exited with 7", "exit_code": 7}},
		},
		{
			name:    "panic",
			handler: func(context.Context, *tools.Context, map[string]any) (any, error) { panic("kaboom") },
			want:    &bub.Error{Kind: bub.KindTool, Message: "Tool 'test_tool' execution failed.", Details: map[string]any{"error": "panic: kaboom"}},
		},
		{
			name: "nil map panic",
			handler: func(_ context.Context, _ *tools.Context, args map[string]any) (any, error) {
				var m map[string]int
				m["x"]++
				return nil, nil
			},
			want: &bub.Error{Kind: bub.KindTool, Message: "Tool 'test_tool' execution failed.", Details: map[string]any{"error": "panic: assignment to entry in nil map"}},
		},
		{
			name:    "validation",
			handler: noop,
			args:    map[string]any{"n": "x"},
			want: &bub.Error{Kind: bub.KindInvalidInput, Message: "Tool 'test_tool' argument validation failed.", Details: map[string]any{"errors": []any{
				map[string]any{"loc": []any{"n"}, "type": "int_parsing", "msg": "Input should be a valid integer, unable to parse string as an integer", "input": "x"},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tools.Tool{Name: "test.tool", Parameters: params, Handler: tt.handler}
			res, err := tools.Invoke(t.Context(), tl, &tools.Context{}, tt.args)
			if res != nil {
				t.Errorf("result = %v, want nil", res)
			}
			if !reflect.DeepEqual(err, tt.want) {
				t.Fatalf("Invoke error = %#v\nwant %#v", err, tt.want)
			}
		})
	}
}

func TestInvokeSuccess(t *testing.T) {
	var got map[string]any
	tl := tools.Tool{
		Name:       "echo",
		Parameters: obj(map[string]any{"n": map[string]any{"type": "integer", "default": 5}}),
		Handler: func(_ context.Context, tc *tools.Context, args map[string]any) (any, error) {
			if tc == nil {
				return nil, errors.New("nil context")
			}
			got = args
			return args["n"], nil
		},
	}
	res, err := tools.Invoke(t.Context(), tl, nil, map[string]any{"n": 2.0})
	if err != nil || res != 2 {
		t.Fatalf("Invoke = %v, %v", res, err)
	}
	if res, err := tools.Invoke(t.Context(), tl, nil, nil); err != nil || res != 5 || got["n"] != 5 {
		t.Fatalf("Invoke(nil args) = %v, %v", res, err)
	}
}

func TestInvokeRequiresContext(t *testing.T) {
	tl := tools.Tool{Name: "fs.read", RequiresContext: true, Handler: noop}
	_, err := tools.Invoke(t.Context(), tl, nil, nil)
	if err == nil || err.Kind != bub.KindInvalidInput || err.Message != "Tool 'fs_read' requires context but none was provided." {
		t.Fatalf("Invoke = %v", err)
	}
	if _, err := tools.Invoke(t.Context(), tl, &tools.Context{}, nil); err != nil {
		t.Fatalf("Invoke with context = %v", err)
	}
	if _, err := tools.Invoke(t.Context(), tools.Tool{Name: "x"}, nil, nil); err == nil || err.Kind != bub.KindTool {
		t.Fatalf("Invoke without handler = %v", err)
	}
}

func TestUnknownTool(t *testing.T) {
	_, err := tools.Invoke(t.Context(), tools.UnknownTool("tepadr"), nil, map[string]any{"any": "thing"})
	if err == nil || err.Kind != bub.KindTool || err.Message != "Unknown tool name: tepadr." {
		t.Fatalf("Invoke(UnknownTool) = %v", err)
	}
}

func TestRenderResult(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"plain <b>", "plain <b>"},
		{map[string]any{"a": "<é>", "b": 1}, `{"a":"<é>","b":1}`},
		{[]int{1, 2}, "[1,2]"},
		{nil, "null"},
		{math.Inf(1), "+Inf"},
	}
	for _, tt := range tests {
		if got := tools.RenderResult(tt.in); got != tt.want {
			t.Errorf("RenderResult(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
