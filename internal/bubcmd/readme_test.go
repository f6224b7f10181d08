package bubcmd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/service"
)

// readmeRow is one row of the README's command table.
type readmeRow struct {
	line  int
	spans []string // the code spans of the first cell, `\|` unescaped
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// readmeCommands reads the table under "## Commands" in the repository's
// README.md at test time (so rows merged from other branches are checked
// too).
func readmeCommands(t *testing.T) []readmeRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []readmeRow
	in := false
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == "## Commands"
			continue
		case !in || !strings.HasPrefix(line, "| `"):
			continue
		}
		// The first cell ends at the first "|" that is not escaped.
		cell := line[1:]
		for j := 0; j < len(cell); j++ {
			if cell[j] == '|' && cell[j-1] != '\\' {
				cell = cell[:j]
				break
			}
		}
		row := readmeRow{line: i + 1}
		for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
			row.spans = append(row.spans, strings.ReplaceAll(m[1], `\|`, "|"))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("README.md has no command table under ## Commands")
	}
	return rows
}

// visible returns c's subcommands that `--help` lists.
func visible(c *cobra.Command) map[string]*cobra.Command {
	out := map[string]*cobra.Command{}
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		out[sub.Name()] = sub
	}
	return out
}

// TestReadmeCommandTableMatchesTheCLI builds bub's root command and checks
// the README's command table against it: every visible top-level command
// has exactly one row; every row names existing commands, subcommands and
// flags (`bub tape list | show`, `--json`), or a binary under cmd/.
func TestReadmeCommandTableMatchesTheCLI(t *testing.T) {
	home := t.TempDir()
	root, err := bubcmd.NewBub(t.Context(), &bubcmd.Env{Env: service.Env{Getenv: func(k string) string {
		if k == "BUB_HOME" {
			return home
		}
		return ""
	}}})
	if err != nil {
		t.Fatal(err)
	}
	top := visible(root)
	rowsOf := map[string][]int{}
	for _, row := range readmeCommands(t) {
		for _, span := range row.spans {
			words := strings.Fields(span)
			if words[0] != "bub" {
				if _, err := os.Stat(filepath.Join("..", "..", "cmd", words[0])); err != nil {
					t.Errorf("README.md:%d: %q is neither a bub command nor a binary under cmd/", row.line, span)
				}
				continue
			}
			if len(words) < 2 {
				t.Errorf("README.md:%d: %q names no command", row.line, span)
				continue
			}
			cmd, ok := top[words[1]]
			if !ok {
				t.Errorf("README.md:%d: %q: bub has no command %q", row.line, span, words[1])
				continue
			}
			if !slices.Contains(rowsOf[cmd.Name()], row.line) {
				rowsOf[cmd.Name()] = append(rowsOf[cmd.Name()], row.line)
			}
			checkUsage(t, row.line, span, cmd, words[2:])
		}
	}
	for name := range top {
		switch n := len(rowsOf[name]); {
		case n == 0:
			t.Errorf("README.md's command table lacks `bub %s` (%s)", name, top[name].Short)
		case n > 1:
			t.Errorf("README.md lists `bub %s` in %d rows (lines %v)", name, n, rowsOf[name])
		}
	}
}

var (
	flagName       = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	subcommandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// checkUsage checks the words after a command's name in a README row: the
// subcommands (lower-case words outside brackets, when cmd has any) and
// every --flag, looked up on cmd or, with subcommands, on one of them.
func checkUsage(t *testing.T, line int, span string, cmd *cobra.Command, words []string) {
	t.Helper()
	subs := visible(cmd)
	depth := 0
	for _, w := range words {
		if depth == 0 && len(subs) > 0 && subcommandWord.MatchString(w) {
			if _, ok := subs[w]; !ok {
				t.Errorf("README.md:%d: %q: `%s` has no subcommand %q", line, span, cmd.CommandPath(), w)
			}
		}
		depth += strings.Count(w, "[") - strings.Count(w, "]")
	}
	for _, m := range flagName.FindAllStringSubmatch(span, -1) {
		found := cmd.Flag(m[1]) != nil
		for _, sub := range subs {
			found = found || sub.Flag(m[1]) != nil
		}
		if !found {
			t.Errorf("README.md:%d: %q: `%s` has no flag --%s", line, span, cmd.CommandPath(), m[1])
		}
	}
}
