package tools_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

// FuzzDecodeArguments feeds model-sent argument text through decoding,
// validation and invocation: nothing may panic, every failure is an
// invalid_input *bub.Error, and validated arguments stay JSON.
func FuzzDecodeArguments(f *testing.F) {
	for _, seed := range []string{
		"", "{}", `{"path":"a","offset":"3","kinds":["x",1],"nested":{"n":1.5}}`,
		`{"path":null,"flag":"yes","ratio":1e400}`, "[1]", `"s"`, "null", "{", `{"a":1}{}`,
		`{"headers":{"a":{"b":[]}},"mode":"r","level":1}`, "\xff\xfe", `{"offset":-9223372036854775808}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		args, err := tools.DecodeArguments(raw)
		if err != nil {
			var be *bub.Error
			if !errors.As(err, &be) || be.Kind != bub.KindInvalidInput {
				t.Fatalf("DecodeArguments(%q) error %v is not invalid_input", raw, err)
			}
			return
		}
		if args == nil {
			t.Fatalf("DecodeArguments(%q) returned nil arguments", raw)
		}
		valid, err := tools.Validate(validated, args)
		if err != nil {
			if be := bub.AsError(err); be.Kind != bub.KindInvalidInput {
				t.Fatalf("Validate error %v is not invalid_input", err)
			}
		} else if _, err := json.Marshal(valid); err != nil {
			t.Fatalf("validated arguments are not JSON: %v", err)
		}
		if _, ierr := tools.Invoke(t.Context(), validated, nil, args); (ierr == nil) != (err == nil) {
			t.Fatalf("Invoke error %v disagrees with Validate error %v", ierr, err)
		}
	})
}

// FuzzParseCommand checks that command parsing and resolution never panic
// and that unquoted lines split on ASCII whitespace.
func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		"", "help", "fs.read README.md 10 5", "fs.write path=a content='hello world'",
		`bash cmd="echo \"x\"" background=true`, "x a=1 b", "echo 'open", `x \`, "x '' \"\"",
		"fs.read a 1 2 3", "fs.read a path=b", "tape_info", "é\u00a0ü\tz",
	} {
		f.Add(seed)
	}
	var reg tools.Registry
	reg.MustRegister(commandTools...)
	f.Fuzz(func(t *testing.T, line string) {
		cmd, err := tools.ParseCommand(line)
		if err == nil && cmd.Name == "" && !strings.ContainsAny(line, `'"`) {
			t.Fatalf("ParseCommand(%q) gave no name", line)
		}
		if !strings.ContainsAny(line, `'"\=`) && err == nil {
			fields := strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t\r\n", r) })
			if got := append([]string{cmd.Name}, cmd.Positional...); !slices.Equal(got, fields) {
				t.Fatalf("ParseCommand(%q) words = %q, want %q", line, got, fields)
			}
		}
		inv, rerr := tools.ResolveCommand(&reg, line)
		if rerr == nil {
			if inv.Tool.Handler == nil {
				t.Fatalf("ResolveCommand(%q) resolved no tool", line)
			}
			_, _ = tools.Invoke(t.Context(), inv.Tool, nil, inv.Args)
		}
	})
}
