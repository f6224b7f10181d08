package depsrule

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/bubbus/bub"

// devTools are what only cmd/bub and pkg/app may link: the embedded
// nats-server (every package of its module), the bench harness, the fake
// model servers, the CLI's command tree and the in-process stack of `bub
// up`.
var devTools = []string{
	"github.com/nats-io/nats-server/v2",
	mod + "/internal/natsx/embedded",
	mod + "/internal/bench",
	mod + "/internal/fakellm",
	mod + "/internal/fakeanthropic",
	mod + "/internal/bubcmd",
	mod + "/internal/stack",
	"github.com/spf13/cobra",
}

// providers are the model providers, which only the worker (and bub) link.
var providers = []string{
	"github.com/openai/openai-go/v3",
	"github.com/anthropics/anthropic-sdk-go/v2",
	mod + "/pkg/llm/providers",
}

// services are the packages of each service; a service binary links its
// own and none of the others (the gateway publishes through
// internal/ingress's gateway, so it may link that one).
var services = map[string][]string{
	"worker":   {mod + "/internal/worker", mod + "/internal/admission", mod + "/internal/workercmd"},
	"ingress":  {mod + "/internal/ingress", mod + "/internal/ingresscmd"},
	"recorder": {mod + "/internal/recorder", mod + "/internal/recordercmd"},
	"gateway":  {mod + "/internal/gateway", mod + "/internal/gatewaycmd"},
}

// others returns the packages of every service but name.
func others(name string) []string {
	var out []string
	for svc, pkgs := range services {
		if svc != name {
			out = append(out, pkgs...)
		}
	}
	return out
}

// without returns list without the packages drop.
func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(p string) bool { return slices.Contains(drop, p) })
}

// TestBinariesLinkOnlyWhatTheyServe reads each binary's package graph
// with `go list -deps` and checks what it links and must not link. cmd/bub
// links every developer tool and provider, which shows the check sees
// them.
func TestBinariesLinkOnlyWhatTheyServe(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH, so the package graphs cannot be listed:", err)
	}
	channels := mod + "/pkg/channels/telegram"
	rules := []struct {
		binary  string
		links   []string
		without [][]string
	}{
		{"worker", append(slices.Clone(services["worker"]), providers...), [][]string{devTools, others("worker")}},
		{"ingress", services["ingress"], [][]string{devTools, providers, others("ingress"), {mod + "/pkg/builtin", channels}}},
		{"recorder", services["recorder"], [][]string{devTools, providers, others("recorder"), {channels}}},
		{"gateway", append(slices.Clone(services["gateway"]), channels), [][]string{devTools, providers, without(others("gateway"), mod+"/internal/ingress")}},
		// fakeanthropic serves tests only, so even bub does not link it.
		{"bub", append(without(devTools, mod+"/internal/fakeanthropic"), providers...), nil},
	}
	for _, r := range rules {
		t.Run(r.binary, func(t *testing.T) {
			g := graph(t, "./cmd/"+r.binary)
			for _, want := range r.links {
				if !g.links(want) {
					t.Errorf("cmd/%s does not link %s", r.binary, want)
				}
			}
			for _, list := range r.without {
				for _, bad := range list {
					if g.links(bad) {
						t.Errorf("cmd/%s links %s: %s", r.binary, bad, strings.Join(g.path(bad), " → "))
					}
				}
			}
		})
	}
}

// deps is a binary's package graph: each package's imports.
type deps struct {
	root    string
	imports map[string][]string
}

// graph lists the package graph of pkg (relative to the module root).
func graph(t *testing.T, pkg string) deps {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", pkg)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	d := deps{imports: map[string][]string{}}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		d.imports[f[0]] = f[1:]
		d.root = f[0] // -deps lists the root last
	}
	return d
}

// matches reports whether pkg is p or a package under it.
func matches(pkg, p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }

// links reports whether the graph has p or a package under it.
func (d deps) links(p string) bool {
	for pkg := range d.imports {
		if matches(pkg, p) {
			return true
		}
	}
	return false
}

// path returns an import chain from the root to p (or a package under
// it), shortest first, for the failure message.
func (d deps) path(p string) []string {
	prev := map[string]string{d.root: ""}
	queue := []string{d.root}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if matches(pkg, p) {
			var chain []string
			for ; pkg != ""; pkg = prev[pkg] {
				chain = append(chain, strings.TrimPrefix(pkg, mod+"/"))
			}
			slices.Reverse(chain)
			return chain
		}
		for _, imp := range d.imports[pkg] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = pkg
				queue = append(queue, imp)
			}
		}
	}
	return nil
}
