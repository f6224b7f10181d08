package tools

import (
	"reflect"
	"testing"
)

// TestSplitWordsMatchesShlex pins splitWords to Python's shlex.split.
func TestSplitWordsMatchesShlex(t *testing.T) {
	tests := map[string][]string{
		"":                            nil,
		"a b  c":                      {"a", "b", "c"},
		"'a b' c":                     {"a b", "c"},
		`"a \"b\" \x" c`:              {`a "b" \x`, "c"},
		`a\ b`:                        {"a b"},
		"''":                          {""},
		"x=''":                        {"x="},
		"content='hello world' n=1":   {"content=hello world", "n=1"},
		`a"b"c`:                       {"abc"},
		"é ü":                         {"é", "ü"},
		`"\\"`:                        {`\`},
		"x 'it''s'":                   {"x", "its"},
		"x \"a'b\" 'c\"d'":            {"x", "a'b", `c"d`},
		"x\u00a0y":                    {"x\u00a0y"}, // only ASCII whitespace separates
		"#not a comment":              {"#not", "a", "comment"},
		"echo $HOME | grep x > f; ls": {"echo", "$HOME", "|", "grep", "x", ">", "f;", "ls"},
	}
	for line, want := range tests {
		got, err := splitWords(line)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", line, got, err, want)
		}
	}
}
