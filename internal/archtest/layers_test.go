package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// module is the module path; the layer table names packages relative to
// it.
const module = "github.com/bubbus/bub"

// docPath is the document whose layer table is the rule set.
var docPath = filepath.Join("..", "..", "docs", "ARCHITECTURE.md")

// layersHeading starts the section whose first table is the layer table.
const layersHeading = "## Layers"

// row is one row of the layer table.
type row struct {
	layer    int
	patterns []string
	// internal says whether the row's packages may import internal/
	// packages (column "Imports internal/").
	internal bool
	line     int
}

// rules is the parsed layer table.
type rules []row

// placement is where a package sits: its row and the pattern that placed
// it there. Packages placed by one pattern form one component.
type placement struct {
	row     *row
	pattern string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// parseRules reads the layer table: the first markdown table after the
// "## Layers" heading, with the columns layer, packages (backticked
// patterns: a package path, or dir/... for dir and everything below it),
// "yes" or "no" for importing internal/, and the role.
func parseRules(doc string) (rules, error) {
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == layersHeading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no %q section", layersHeading)
	}
	var rs rules
	seen := map[string]int{}
	var errs []error
	inTable, header := false, 0
	for i := start; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			if strings.HasPrefix(l, "## ") {
				break
			}
			continue
		}
		inTable = true
		if header < 2 { // the header and the separator
			header++
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) < 4 {
			errs = append(errs, fmt.Errorf("line %d: want 4 columns, got %d", i+1, len(cells)))
			continue
		}
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		r := row{line: i + 1}
		var err error
		if r.layer, err = strconv.Atoi(cells[0]); err != nil || r.layer < 1 {
			errs = append(errs, fmt.Errorf("line %d: layer %q is not a positive number", i+1, cells[0]))
		}
		switch cells[2] {
		case "yes":
			r.internal = true
		case "no":
		default:
			errs = append(errs, fmt.Errorf("line %d: column \"Imports internal/\" is %q, want yes or no", i+1, cells[2]))
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			p := m[1]
			if strings.ContainsAny(p, " \t") || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
				errs = append(errs, fmt.Errorf("line %d: %q is not a package pattern", i+1, p))
				continue
			}
			if at, dup := seen[p]; dup {
				errs = append(errs, fmt.Errorf("line %d: %s is already placed on line %d", i+1, p, at))
				continue
			}
			seen[p] = i + 1
			r.patterns = append(r.patterns, p)
		}
		if len(r.patterns) == 0 {
			errs = append(errs, fmt.Errorf("line %d: no package patterns", i+1))
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		errs = append(errs, fmt.Errorf("no table under %q", layersHeading))
	}
	return rs, errors.Join(errs...)
}

// place finds the row of pkg (a module-relative path): the row naming it
// exactly, else the row with the longest dir/... pattern covering it.
func (rs rules) place(pkg string) (placement, bool) {
	var best placement
	bestLen := -1
	for i := range rs {
		for _, p := range rs[i].patterns {
			base, tree := strings.CutSuffix(p, "/...")
			switch {
			case !tree && pkg == p:
				return placement{&rs[i], p}, true
			case tree && (pkg == base || strings.HasPrefix(pkg, base+"/")) && len(base) > bestLen:
				best, bestLen = placement{&rs[i], p}, len(base)
			}
		}
	}
	return best, bestLen >= 0
}

// check returns why from may not import to (both module-relative), or
// nil when it may: to is in a lower layer, or in the same component (one
// pattern places both); and only rows that say so import internal/.
func (rs rules) check(from, to string) error {
	f, ok := rs.place(from)
	if !ok {
		return fmt.Errorf("%s is in no row of the layer table", from)
	}
	t, ok := rs.place(to)
	if !ok {
		return fmt.Errorf("%s is in no row of the layer table", to)
	}
	if strings.HasPrefix(to, "internal/") && !f.row.internal {
		return fmt.Errorf("%s imports %s, but %s (row `%s`) is public code and may not import internal/ packages", from, to, from, f.pattern)
	}
	switch {
	case t.row.layer < f.row.layer:
		return nil
	case t.row == f.row && t.pattern == f.pattern:
		return nil
	case t.row.layer == f.row.layer:
		return fmt.Errorf("%s (`%s`) imports %s (`%s`) of its own layer %d: the components of a layer are independent", from, f.pattern, to, t.pattern, f.row.layer)
	default:
		return fmt.Errorf("%s (layer %d) imports %s (layer %d): a package imports only packages of lower layers", from, f.row.layer, to, t.row.layer)
	}
}

func readRules(t *testing.T) rules {
	t.Helper()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := parseRules(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", docPath, err)
	}
	return rs
}

// listed is one package of `go list -json`.
type listed struct {
	ImportPath string
	Imports    []string
}

// loadGraph lists every package of the module with its non-test imports,
// as module-relative paths (imports outside the module are dropped).
func loadGraph(t *testing.T) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list packages: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		from, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			t.Fatalf("go list: package %s is outside module %s", p.ImportPath, module)
		}
		imports := []string{}
		for _, imp := range p.Imports {
			if to, ok := strings.CutPrefix(imp, module+"/"); ok {
				imports = append(imports, to)
			}
		}
		graph[from] = imports
	}
	if len(graph) == 0 {
		t.Fatal("go list found no packages")
	}
	return graph
}

// TestImportsFollowTheLayers holds the module to the layer table of
// docs/ARCHITECTURE.md: every package is in exactly one row, every row
// names packages that exist, and every import (test files aside) goes to
// a lower layer or stays inside its component, with internal/ packages
// imported only by rows that may.
func TestImportsFollowTheLayers(t *testing.T) {
	rs := readRules(t)
	graph := loadGraph(t)
	for pkg := range graph {
		if _, ok := rs.place(pkg); !ok {
			t.Errorf("%s is in no row of the layer table of docs/ARCHITECTURE.md: add it to the layer whose role it has", pkg)
		}
	}
	for _, r := range rs {
		for _, p := range r.patterns {
			used := false
			for pkg := range graph {
				if pl, ok := rs.place(pkg); ok && pl.pattern == p {
					used = true
					break
				}
			}
			if !used {
				t.Errorf("docs/ARCHITECTURE.md line %d: `%s` places no package of the module", r.line, p)
			}
		}
	}
	for from, imports := range graph {
		for _, to := range imports {
			if err := rs.check(from, to); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestLayerRulesCatchViolations pins what the rules of the table allow
// and forbid, so a table that stopped forbidding anything fails here.
func TestLayerRulesCatchViolations(t *testing.T) {
	rs := readRules(t)
	for _, c := range []struct {
		from, to string
		ok       bool
		why      string
	}{
		{"pkg/llm/openai", "pkg/llm", true, "one component (pkg/llm/...)"},
		{"pkg/hooks/interceptor", "pkg/hooks/remote", true, "one component (pkg/hooks/...)"},
		{"pkg/agent", "pkg/events", true, "a lower layer"},
		{"pkg/events", "pkg/tools", true, "events carry tool calls"},
		{"pkg/tape", "pkg/llm", true, "the tape holds chat messages"},
		{"pkg/tools", "pkg/hooks", false, "a higher layer"},
		{"pkg/llm", "pkg/tape", false, "a higher layer"},
		{"pkg/events", "pkg/hooks", false, "events and hooks are independent"},
		{"pkg/hooks", "pkg/events", false, "events and hooks are independent"},
		{"pkg/builtin", "pkg/channels", false, "plugins are independent"},
		{"internal/telemetry", "pkg/hooks/remote", false, "infrastructure knows no plugin"},
		{"pkg/hooks/remote", "internal/telemetry", false, "public code imports no internal/ package"},
		{"examples/plugins/opsbot", "internal/natstest", false, "examples are written like a user's module"},
		{"pkg/app", "internal/bubcmd", true, "the public entry point wraps the CLI"},
		{"internal/ingress", "internal/worker", false, "services are independent"},
		{"internal/admission", "internal/worker", true, "admission wraps the worker's Processor"},
		{"internal/worker", "internal/fakellm", false, "test kits stay out of services"},
		{"internal/bubcmd", "internal/fakellm", true, "the CLI serves bub fake-llm"},
		{"internal/stack", "internal/bubcmd", false, "the wiring knows no commands"},
	} {
		err := rs.check(c.from, c.to)
		if (err == nil) != c.ok {
			t.Errorf("%s → %s (%s): allowed = %v, want %v (%v)", c.from, c.to, c.why, err == nil, c.ok, err)
		}
	}
}

// TestParseRulesRejectsBadRows: a malformed table is an error, not a
// smaller rule set.
func TestParseRulesRejectsBadRows(t *testing.T) {
	const head = "# x\n\n## Layers\n\n| Layer | Packages | Imports internal/ | Role |\n| --- | --- | --- | --- |\n"
	for name, table := range map[string]string{
		"layer not a number":  "| one | `pkg/bub` | no | vocabulary |\n",
		"internal not yes/no": "| 1 | `pkg/bub` | maybe | vocabulary |\n",
		"no patterns":         "| 1 | pkg/bub | no | vocabulary |\n",
		"placed twice":        "| 1 | `pkg/bub` | no | a |\n| 2 | `pkg/bub` | no | b |\n",
		"too few columns":     "| 1 | `pkg/bub` |\n",
	} {
		if _, err := parseRules(head + table); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	if _, err := parseRules("# no layers section\n"); err == nil {
		t.Error("a document without the section parsed without error")
	}
	rs, err := parseRules(head + "| 1 | `pkg/bub`, `pkg/llm/...` | no | a |\n| 2 | `pkg/llm/openai` | no | b |\n\nprose\n| 9 | `x` | no | not in the table |\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("rows %+v, want 2 (the table ends at the first line that is not a row)", rs)
	}
	if p, _ := rs.place("pkg/llm/openai"); p.row.layer != 2 {
		t.Errorf("pkg/llm/openai placed on layer %d, want 2 (an exact pattern wins)", p.row.layer)
	}
	if p, _ := rs.place("pkg/llm/echo"); p.pattern != "pkg/llm/..." {
		t.Errorf("pkg/llm/echo placed by %q, want pkg/llm/...", p.pattern)
	}
	if _, ok := rs.place("pkg/llmx"); ok {
		t.Error("pkg/llmx placed by pkg/llm/...")
	}
}
