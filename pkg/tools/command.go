package tools

import (
	"errors"
	"fmt"
	"strings"
)

// CommandPrefix starts a comma command: input whose trimmed text begins
// with it bypasses the model.
const CommandPrefix = ","

// ShellTool is the runtime name of the tool that runs a command line which
// names no registered tool.
const ShellTool = "bash"

// Command errors callers may branch on.
var (
	// ErrEmptyCommand reports a command line with nothing after the prefix.
	ErrEmptyCommand = errors.New("empty command")
	// ErrCommandSyntax reports unbalanced quotes or a trailing backslash.
	ErrCommandSyntax = errors.New("command syntax")
)

// CommandLine reports whether text is a comma command and returns the
// command line: text trimmed, without the prefix, trimmed again.
func CommandLine(text string) (line string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), CommandPrefix)
	return strings.TrimSpace(rest), ok
}

// Command is a parsed command line: the first word names the tool, the
// others are positional arguments until the first key=value word, after
// which every word must be key=value.
type Command struct {
	Name       string
	Positional []string
	Keywords   map[string]string
}

// ParseCommand splits line (a command line without its prefix) with shell
// quoting rules ('…' literal, "…" with \" and \\ escapes, \x outside
// quotes) and parses the words. A word containing "=" is a keyword
// argument split at its first "=", quoted or not. Errors: [ErrEmptyCommand]
// ("empty command"), [ErrCommandSyntax], and "positional argument '<t>'
// cannot appear after keyword arguments".
func ParseCommand(line string) (Command, error) {
	words, err := splitWords(line)
	if err != nil {
		return Command{}, err
	}
	if len(words) == 0 {
		return Command{}, ErrEmptyCommand
	}
	return parseWords(words)
}

// parseWords parses the words of a non-empty command line.
func parseWords(words []string) (Command, error) {
	cmd := Command{Name: words[0], Keywords: map[string]string{}}
	for _, w := range words[1:] {
		if key, value, ok := strings.Cut(w, "="); ok {
			cmd.Keywords[key] = value
			continue
		}
		if len(cmd.Keywords) > 0 {
			return Command{}, fmt.Errorf("positional argument '%s' cannot appear after keyword arguments", w)
		}
		cmd.Positional = append(cmd.Positional, w)
	}
	return cmd, nil
}

// Arguments binds the command's words to t's parameters: positional words
// in [Tool.ParamNames] order, then keywords, all coerced by the schema
// (see [Coerce]). The result still needs [Validate] (which [Invoke] does).
func (c Command) Arguments(t Tool) (map[string]any, error) {
	names := t.ParamNames()
	if len(c.Positional) > len(names) {
		return nil, fmt.Errorf("%s takes %d positional argument(s) but %d were given", t.Name, len(names), len(c.Positional))
	}
	values := make(map[string]string, len(c.Positional)+len(c.Keywords))
	for i, v := range c.Positional {
		values[names[i]] = v
	}
	for k, v := range c.Keywords {
		if _, dup := values[k]; dup {
			return nil, fmt.Errorf("%s got multiple values for argument '%s'", t.Name, k)
		}
		values[k] = v
	}
	return Coerce(t.Parameters, values), nil
}

// Invocation is a command line resolved against a registry.
type Invocation struct {
	// Line is the command line as given (the "raw" of Bub's command event).
	Line string
	// Name is the line's first word (the "name" of the command event),
	// also when the line runs as a shell command.
	Name string
	// Tool runs the command: the tool named Name, or the shell tool.
	Tool Tool
	// Args are Tool's arguments, coerced but not yet validated.
	Args map[string]any
}

// ResolveCommand resolves a command line (without its prefix) as Bub does:
// when its first word is exactly a registered runtime name ("tape.info";
// model-facing aliases like "tape_info" do not count), that tool runs with
// the parsed arguments; any other line runs through the [ShellTool] with
// the whole line as "cmd". On error the Invocation still carries Line and,
// when the line could be split, Name.
func ResolveCommand(reg *Registry, line string) (Invocation, error) {
	inv := Invocation{Line: strings.TrimSpace(line)}
	words, err := splitWords(inv.Line)
	if err != nil {
		return inv, err
	}
	if len(words) == 0 {
		return inv, ErrEmptyCommand
	}
	inv.Name = words[0]
	if t, ok := reg.Get(inv.Name); ok {
		cmd, err := parseWords(words)
		if err != nil {
			return inv, err
		}
		inv.Tool = t
		inv.Args, err = cmd.Arguments(t)
		return inv, err
	}
	shell, ok := reg.Get(ShellTool)
	if !ok {
		return inv, fmt.Errorf("command %q names no tool and the %s tool is not registered", inv.Name, ShellTool)
	}
	inv.Tool, inv.Args = shell, map[string]any{"cmd": inv.Line}
	return inv, nil
}

// splitWords is Python's shlex.split(line) (POSIX mode, no comments). It
// works on bytes: every special character is ASCII, and other bytes, even
// invalid UTF-8, are kept as they are.
func splitWords(line string) ([]string, error) {
	var (
		words  []string
		word   strings.Builder
		inWord bool // a word has started, possibly empty ('' or "")
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t', '\r', '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("%w: no closing quotation", ErrCommandSyntax)
			}
			word.WriteString(line[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				word.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, fmt.Errorf("%w: no closing quotation", ErrCommandSyntax)
			}
			inWord = true
		case '\\':
			if i+1 == len(line) {
				return nil, fmt.Errorf("%w: no escaped character", ErrCommandSyntax)
			}
			i++
			word.WriteByte(line[i])
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
