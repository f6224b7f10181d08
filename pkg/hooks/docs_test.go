package hooks_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/hooks"
)

// TestDocsHookTable checks the hook table of docs/hooks.md against
// hooks.Specs() row by row — name, kind, phase, order and failure rule, in
// Specs order — and the interface it names against hookspecs.go, so the
// document cannot drift from the code.
func TestDocsHookTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "hooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := hookTableRows(t, string(doc))
	ifaces := interfacesOfHooks(t)
	specs := hooks.Specs()
	if len(rows) != len(specs) {
		t.Fatalf("docs/hooks.md lists %d hooks, hooks.Specs() has %d", len(rows), len(specs))
	}
	for i, s := range specs {
		r := rows[i]
		failures := "propagate"
		if s.Isolated {
			failures = "isolated"
		}
		want := []string{"`" + string(s.Hook) + "`", "`" + ifaces[s.Hook] + "`", string(s.Kind), string(s.Phase), string(s.Order), failures}
		for j, w := range want {
			if r[j] != w {
				t.Errorf("docs/hooks.md row %d (%s), column %d: %q, want %q", i+1, s.Hook, j+1, r[j], w)
			}
		}
	}
}

// hookTableRows returns the cells of the table under "## The hook table".
func hookTableRows(t *testing.T, doc string) [][]string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## The hook table\n")
	if !ok {
		t.Fatal(`docs/hooks.md has no "## The hook table" section`)
	}
	var rows [][]string
	started := false
	for _, l := range strings.Split(section, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "Hook" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) < 7 {
			t.Fatalf("docs/hooks.md row %q: want 7 columns", l)
		}
		rows = append(rows, cells)
	}
	return rows
}

var implementsHook = regexp.MustCompile(`^(\w+) implements (\w+)`)

// interfacesOfHooks maps each hook to the interface hookspecs.go says
// implements it, written as docs/hooks.md writes it (Name, or Name[S] for
// a generic one).
func interfacesOfHooks(t *testing.T) map[hooks.Hook]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "hookspecs.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[hooks.Hook]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE || g.Doc == nil {
			continue
		}
		ts := g.Specs[0].(*ast.TypeSpec)
		if _, ok := ts.Type.(*ast.InterfaceType); !ok {
			continue
		}
		m := implementsHook.FindStringSubmatch(g.Doc.Text())
		if m == nil || m[1] != ts.Name.Name {
			continue
		}
		name := ts.Name.Name
		if ts.TypeParams != nil {
			var params []string
			for _, p := range ts.TypeParams.List {
				for _, n := range p.Names {
					params = append(params, n.Name)
				}
			}
			name += "[" + strings.Join(params, ", ") + "]"
		}
		out[hooks.Hook(m[2])] = name
	}
	return out
}
