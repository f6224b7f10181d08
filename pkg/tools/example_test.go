package tools_test

import (
	"context"
	"fmt"

	"github.com/bubbus/bub/pkg/tools"
)

func Example() {
	var reg tools.Registry
	reg.MustRegister(tools.Tool{
		Name:        "text.upper",
		Description: "Upper-case a text.",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"text": map[string]any{"type": "string"}, "times": map[string]any{"type": "integer", "default": 1}},
			"required":   []string{"text"},
		},
		Order: []string{"text", "times"},
		Handler: func(_ context.Context, _ *tools.Context, args map[string]any) (any, error) {
			out := ""
			for range args["times"].(int) {
				out += fmt.Sprint(args["text"])
			}
			return out, nil
		},
	})
	fmt.Println(tools.RenderPrompt(reg.All()))

	// A model's tool call: model-facing name and JSON text arguments.
	t, _ := reg.Lookup("text_upper")
	args, _ := tools.DecodeArguments(`{"text": "ab", "times": "2"}`)
	result, err := tools.Invoke(context.Background(), t, &tools.Context{}, args)
	fmt.Println(result, err == nil)

	_, err = tools.Invoke(context.Background(), t, &tools.Context{}, map[string]any{})
	fmt.Println(err)
	// Output:
	// <available_tools>
	// - text_upper(text, times?): Upper-case a text.
	// </available_tools>
	// abab true
	// [invalid_input] Tool 'text_upper' argument validation failed.
}

func ExampleResolveCommand() {
	var reg tools.Registry
	noop := func(context.Context, *tools.Context, map[string]any) (any, error) { return nil, nil }
	reg.MustRegister(
		tools.Tool{Name: "bash", Handler: noop, Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}},
		tools.Tool{Name: "fs.read", Handler: noop, Parameters: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "offset": map[string]any{"type": "integer"}}}, Order: []string{"path", "offset"}},
	)
	for _, text := range []string{",fs.read README.md offset=2", ",ls -la | head"} {
		line, _ := tools.CommandLine(text)
		inv, err := tools.ResolveCommand(&reg, line)
		fmt.Println(inv.Name, "→", inv.Tool.Name, inv.Args, err)
	}
	// Output:
	// fs.read → fs.read map[offset:2 path:README.md] <nil>
	// ls → bash map[cmd:ls -la | head] <nil>
}

func ExampleUnknownToolGuidance() {
	fmt.Println(tools.UnknownToolGuidance("fs_reed", []string{"bash", "fs_read", "web_fetch"}, false))
	// Output:
	// Tool `fs_reed` does not exist. Did you mean one of the following?
	// - fs_read
}
