package skills

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/bubbus/bub/internal/proctest"
)

// writeSkill writes root/dir/SKILL.md with the given front matter lines
// and body and returns the file's path.
func writeSkill(t testing.TB, root, dir, front, body string) string {
	t.Helper()
	path := filepath.Join(root, dir, FileName)
	writeFile(t, path, "---\n"+front+"\n---\n"+body)
	return path
}

// simpleSkill writes a valid skill named name with description desc.
func simpleSkill(t testing.TB, root, name, desc, body string) string {
	t.Helper()
	return writeSkill(t, root, name, "name: "+name+"\ndescription: "+desc, body)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// configLookup is a Lookup over a YAML document where an environment
// variable BUB_<PATH> (dots and dashes as underscores, upper case) read
// through getenv overrides the YAML value, as Bub's settings do.
func configLookup(t testing.TB, doc string, getenv func(string) (string, bool)) Lookup {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	envName := strings.NewReplacer(".", "_", "-", "_")
	return func(path string) (any, bool) {
		if v, ok := getenv("BUB_" + strings.ToUpper(envName.Replace(path))); ok {
			return v, true
		}
		var cur any = cfg
		for _, key := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[key]; !ok {
				return nil, false
			}
		}
		return cur, true
	}
}

// envMap is a getenv over a fixed map.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// debugLogger logs every level as text into b.
func debugLogger(b *proctest.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// names returns the names of list.
func names(list []Skill) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.Name
	}
	return out
}

// byName indexes list by name.
func byName(list []Skill) map[string]Skill {
	m := make(map[string]Skill, len(list))
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}
