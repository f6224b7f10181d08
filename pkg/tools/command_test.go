package tools_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/bubbus/bub/pkg/tools"
)

func TestCommandLine(t *testing.T) {
	tests := []struct {
		text, line string
		ok         bool
	}{
		{",help", "help", true},
		{"  ,  fs.read path=a  \n", "fs.read path=a", true},
		{",", "", true},
		{"hello, world", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		line, ok := tools.CommandLine(tt.text)
		if ok != tt.ok || (ok && line != tt.line) {
			t.Errorf("CommandLine(%q) = %q, %v; want %q, %v", tt.text, line, ok, tt.line, tt.ok)
		}
	}
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line string
		want tools.Command
		err  string
	}{
		{line: "help", want: tools.Command{Name: "help", Keywords: map[string]string{}}},
		{line: "fs.read README.md 10", want: tools.Command{Name: "fs.read", Positional: []string{"README.md", "10"}, Keywords: map[string]string{}}},
		{line: "fs.write path=tmp.txt content='hello world'", want: tools.Command{Name: "fs.write", Keywords: map[string]string{"path": "tmp.txt", "content": "hello world"}}},
		{line: `bash cmd="echo \"hi\" \x" background=true`, want: tools.Command{Name: "bash", Keywords: map[string]string{"cmd": `echo "hi" \x`, "background": "true"}}},
		{line: "tape.handoff name=phase-1 summary=a=b", want: tools.Command{Name: "tape.handoff", Keywords: map[string]string{"name": "phase-1", "summary": "a=b"}}},
		{line: "x a b=  ", want: tools.Command{Name: "x", Positional: []string{"a"}, Keywords: map[string]string{"b": ""}}},
		{line: "x '' a\\ b", want: tools.Command{Name: "x", Positional: []string{"", "a b"}, Keywords: map[string]string{}}},
		{line: "x\tk=v\nk=w", want: tools.Command{Name: "x", Keywords: map[string]string{"k": "w"}}},
		{line: "", err: "empty command"},
		{line: " \t ", err: "empty command"},
		{line: "x a=1 b", err: "positional argument 'b' cannot appear after keyword arguments"},
		{line: "x 'open", err: "command syntax: no closing quotation"},
		{line: `x "open`, err: "command syntax: no closing quotation"},
		{line: `x trailing\`, err: "command syntax: no escaped character"},
	}
	for _, tt := range tests {
		got, err := tools.ParseCommand(tt.line)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseCommand(%q) error = %v, want %q", tt.line, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseCommand(%q) = %#v, %v; want %#v", tt.line, got, err, tt.want)
		}
	}
	if _, err := tools.ParseCommand(""); !errors.Is(err, tools.ErrEmptyCommand) {
		t.Errorf("empty command error %v is not ErrEmptyCommand", err)
	}
}

var commandTools = []tools.Tool{
	{
		Name:    "bash",
		Handler: noop,
		Parameters: obj(map[string]any{
			"cmd": map[string]any{"type": "string"}, "cwd": map[string]any{"type": "string"},
			"timeout_seconds": map[string]any{"type": "integer"}, "background": map[string]any{"type": "boolean"},
		}),
		Order: []string{"cmd", "cwd", "timeout_seconds", "background"},
	},
	{
		Name:    "fs.read",
		Handler: noop,
		Parameters: map[string]any{"type": "object", "required": []string{"path"}, "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "offset": map[string]any{"type": "integer"}, "limit": map[string]any{"type": "integer"},
		}},
		Order: []string{"path", "offset", "limit"},
	},
	{Name: "tape.info", Handler: noop},
}

func TestCommandArguments(t *testing.T) {
	fsRead := commandTools[1]
	tests := []struct {
		line string
		want map[string]any
		err  string
	}{
		{line: "fs.read README.md 10 5", want: map[string]any{"path": "README.md", "offset": 10, "limit": 5}},
		{line: "fs.read README.md limit=5", want: map[string]any{"path": "README.md", "limit": 5}},
		{line: "fs.read path=a offset=x", want: map[string]any{"path": "a", "offset": "x"}},
		{line: "fs.read a 1 2 3", err: "fs.read takes 3 positional argument(s) but 4 were given"},
		{line: "fs.read a path=b", err: "fs.read got multiple values for argument 'path'"},
	}
	for _, tt := range tests {
		cmd, err := tools.ParseCommand(tt.line)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cmd.Arguments(fsRead)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Arguments(%q) error = %v, want %q", tt.line, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Arguments(%q) = %#v, %v; want %#v", tt.line, got, err, tt.want)
		}
	}
}

func TestResolveCommand(t *testing.T) {
	var reg tools.Registry
	reg.MustRegister(commandTools...)
	tests := []struct {
		line string
		want tools.Invocation // Tool is compared by name
		err  string
	}{
		{
			line: "bash cmd='sleep 5' background=true",
			want: tools.Invocation{Line: "bash cmd='sleep 5' background=true", Name: "bash", Tool: commandTools[0], Args: map[string]any{"cmd": "sleep 5", "background": true}},
		},
		{
			line: " tape.info ",
			want: tools.Invocation{Line: "tape.info", Name: "tape.info", Tool: commandTools[2], Args: map[string]any{}},
		},
		{
			// Model-facing aliases are not command names: the line goes to bash.
			line: "tape_info",
			want: tools.Invocation{Line: "tape_info", Name: "tape_info", Tool: commandTools[0], Args: map[string]any{"cmd": "tape_info"}},
		},
		{
			// Unknown commands run whole through bash, keyword rules do not apply.
			line: "echo a=b 'c d' | wc -c",
			want: tools.Invocation{Line: "echo a=b 'c d' | wc -c", Name: "echo", Tool: commandTools[0], Args: map[string]any{"cmd": "echo a=b 'c d' | wc -c"}},
		},
		{line: "  ", want: tools.Invocation{}, err: "empty command"},
		{line: "echo 'x", want: tools.Invocation{Line: "echo 'x"}, err: "command syntax: no closing quotation"},
		{line: "fs.read a=1 b", want: tools.Invocation{Line: "fs.read a=1 b", Name: "fs.read"}, err: "positional argument 'b' cannot appear after keyword arguments"},
	}
	for _, tt := range tests {
		got, err := tools.ResolveCommand(&reg, tt.line)
		if tt.err != "" && (err == nil || err.Error() != tt.err) {
			t.Errorf("ResolveCommand(%q) error = %v, want %q", tt.line, err, tt.err)
		}
		if tt.err == "" && err != nil {
			t.Errorf("ResolveCommand(%q): %v", tt.line, err)
		}
		if got.Line != tt.want.Line || got.Name != tt.want.Name || got.Tool.Name != tt.want.Tool.Name || !reflect.DeepEqual(got.Args, tt.want.Args) {
			t.Errorf("ResolveCommand(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}

	var noShell tools.Registry
	if _, err := tools.ResolveCommand(&noShell, "ls"); err == nil {
		t.Error("ResolveCommand without bash succeeded")
	}
}
