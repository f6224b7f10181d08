package skills

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/pkg/bub"
)

// TestBehaviour76 is behaviour check 76 (test_skills.py): a body's
// ${config.telegram.token} and $SKILL_DIR become the YAML token and the
// skill directory, an environment variable overrides the YAML value, a
// non-string metadata value invalidates the skill, and project skills
// override global and builtin ones.
func TestBehaviour76(t *testing.T) {
	tmp := t.TempDir()
	workspace, home, builtin := filepath.Join(tmp, "ws"), filepath.Join(tmp, "home"), filepath.Join(tmp, "builtin")
	project, global := filepath.Join(workspace, ProjectDir), filepath.Join(home, ProjectDir)
	simpleSkill(t, project, "demo-skill", "Demo", "Token: \"${config.telegram.token}\"\nSkill dir: $SKILL_DIR")
	writeSkill(t, project, "bad-skill", "name: bad-skill\ndescription: bad\nmetadata:\n  retries: 3", "Body")
	simpleSkill(t, project, "shared", "project version", "p")
	simpleSkill(t, global, "shared", "global version", "g")
	simpleSkill(t, builtin, "shared", "builtin version", "b")
	simpleSkill(t, global, "global-only", "global only", "g")
	simpleSkill(t, builtin, "builtin-only", "builtin only", "b")
	const doc = "telegram:\n  token: yaml-token\n"

	var logs proctest.Buffer
	env := map[string]string{}
	c := New(Options{Home: home, Builtin: []string{builtin}, Config: configLookup(t, doc, envMap(env)), Log: debugLogger(&logs)})
	list, err := c.Discover(t.Context(), workspace)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(list), []string{"builtin-only", "demo-skill", "global-only", "shared"}; !slices.Equal(got, want) {
		t.Fatalf("skills %v, want %v (bad-skill is invalid)", got, want)
	}
	if !strings.Contains(logs.String(), "bad-skill") || !strings.Contains(logs.String(), errMetadata.Error()) {
		t.Errorf("the invalid skill's reason is not logged:\n%s", logs.String())
	}
	idx := byName(list)
	for name, want := range map[string]struct {
		desc   string
		source Source
	}{
		"shared":       {"project version", SourceProject},
		"global-only":  {"global only", SourceGlobal},
		"builtin-only": {"builtin only", SourceBuiltin},
		"demo-skill":   {"Demo", SourceProject},
	} {
		if s := idx[name]; s.Description != want.desc || s.Source != want.source {
			t.Errorf("%s = %q from %s, want %q from %s", name, s.Description, s.Source, want.desc, want.source)
		}
	}

	demo := idx["demo-skill"]
	dir := filepath.Join(project, "demo-skill")
	if want := "Token: \"yaml-token\"\nSkill dir: " + dir; demo.Body() != want {
		t.Errorf("body = %q, want %q", demo.Body(), want)
	}
	if demo.Location != filepath.Join(dir, FileName) || demo.Dir() != dir {
		t.Errorf("location %q dir %q", demo.Location, demo.Dir())
	}
	env["BUB_TELEGRAM_TOKEN"] = "env-token"
	if want := "Token: \"env-token\"\nSkill dir: " + dir; demo.Body() != want {
		t.Errorf("body with BUB_TELEGRAM_TOKEN = %q, want %q", demo.Body(), want)
	}
}

// TestValidation pins every rule of a valid SKILL.md, one row each.
func TestValidation(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		about, dir, text string
		err              error // nil: valid
		desc             string
		meta             map[string]string
	}{
		{about: "minimal", dir: "demo", text: "---\nname: demo\ndescription: Does things\n---\nbody", desc: "Does things"},
		{about: "text trimmed first", dir: "demo", text: "\n\n  ---\nname: demo\ndescription: d\n---\n", desc: "d"},
		{about: "markers trimmed", dir: "demo", text: "---  \nname: demo\ndescription: d\n  ---\t\nbody", desc: "d"},
		{about: "keys lowercased", dir: "demo", text: "---\nNAME: demo\nDescription: d\n---", desc: "d"},
		{about: "values trimmed", dir: "demo", text: "---\nname: '  demo '\ndescription: '  d  '\n---", desc: "d"},
		{about: "windows line ends", dir: "demo", text: "---\r\nname: demo\r\ndescription: d\r\n---\r\nbody", desc: "d"},
		{about: "first line not ---", dir: "demo", text: "name: demo\ndescription: d", err: errNoFrontMatter},
		{about: "front matter not closed", dir: "demo", text: "---\nname: demo\ndescription: d", err: errNoFrontMatter},
		{about: "bad YAML is empty", dir: "demo", text: "---\nname: [broken\n---\nbody", err: errNoFrontMatter},
		{about: "YAML list", dir: "demo", text: "---\n- name\n- demo\n---", err: errNoFrontMatter},
		{about: "YAML scalar", dir: "demo", text: "---\ndemo\n---", err: errNoFrontMatter},
		{about: "front matter too long", dir: "demo", text: "---\nname: demo\ndescription: d\nx: " + long(MaxFrontMatter) + "\n---", err: errNoFrontMatter},
		{about: "empty map", dir: "demo", text: "---\n{}\n---", err: errors.Join(errName, errDescription)},
		{about: "invalid UTF-8", dir: "demo", text: "---\nname: demo\ndescription: \xff\n---", err: errEncoding},
		{about: "name missing", dir: "demo", text: "---\ndescription: d\n---", err: errName},
		{about: "name not a string", dir: "123", text: "---\nname: 123\ndescription: d\n---", err: errName},
		{about: "name quoted digits", dir: "123", text: "---\nname: '123'\ndescription: d\n---", desc: "d"},
		{about: "name blank", dir: "demo", text: "---\nname: '   '\ndescription: d\n---", err: errName},
		{about: "name 64 chars", dir: long(64), text: "---\nname: " + long(64) + "\ndescription: d\n---", desc: "d"},
		{about: "name 65 chars", dir: long(65), text: "---\nname: " + long(65) + "\ndescription: d\n---", err: errName},
		{about: "name upper case", dir: "Demo", text: "---\nname: Demo\ndescription: d\n---", err: errName},
		{about: "name underscore", dir: "demo_skill", text: "---\nname: demo_skill\ndescription: d\n---", err: errName},
		{about: "name leading hyphen", dir: "-demo", text: "---\nname: -demo\ndescription: d\n---", err: errName},
		{about: "name trailing hyphen", dir: "demo-", text: "---\nname: demo-\ndescription: d\n---", err: errName},
		{about: "name double hyphen", dir: "demo--x", text: "---\nname: demo--x\ndescription: d\n---", err: errName},
		{about: "name kebab", dir: "demo-x-2", text: "---\nname: demo-x-2\ndescription: d\n---", desc: "d"},
		{about: "name is not the directory", dir: "other", text: "---\nname: demo\ndescription: d\n---", err: errNameDir},
		{about: "description missing", dir: "demo", text: "---\nname: demo\n---", err: errDescription},
		{about: "description not a string", dir: "demo", text: "---\nname: demo\ndescription: 3\n---", err: errDescription},
		{about: "description blank", dir: "demo", text: "---\nname: demo\ndescription: '  '\n---", err: errDescription},
		{about: "description 1024 chars", dir: "demo", text: "---\nname: demo\ndescription: " + long(1024) + "\n---", desc: long(1024)},
		{about: "description 1024 runes", dir: "demo", text: "---\nname: demo\ndescription: " + strings.Repeat("é", 1024) + "\n---", desc: strings.Repeat("é", 1024)},
		{about: "description 1025 chars", dir: "demo", text: "---\nname: demo\ndescription: " + long(1025) + "\n---", err: errDescription},
		{about: "metadata strings", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata:\n  author: me\n  version: '1'\n---", desc: "d", meta: map[string]string{"author": "me", "version": "1"}},
		{about: "metadata null", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata:\n---", desc: "d"},
		{about: "metadata empty", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata: {}\n---", desc: "d", meta: map[string]string{}},
		{about: "metadata int value", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata:\n  retries: 3\n---", err: errMetadata},
		{about: "metadata bool value", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata:\n  on: true\n---", err: errMetadata},
		{about: "metadata nested", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata:\n  a:\n    b: c\n---", err: errMetadata},
		{about: "metadata list", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata: [a]\n---", err: errMetadata},
		{about: "metadata string", dir: "demo", text: "---\nname: demo\ndescription: d\nmetadata: a\n---", err: errMetadata},
		{about: "every failure reported", dir: "demo", text: "---\nname: Demo\nmetadata: 1\n---", err: errors.Join(errName, errDescription, errMetadata)},
	}
	for _, tt := range tests {
		s, err := newSkill(tt.dir, tt.text)
		switch {
		case tt.err == nil && err != nil:
			t.Errorf("%s: invalid: %v", tt.about, err)
		case tt.err != nil && (err == nil || !sameReasons(err, tt.err)):
			t.Errorf("%s: error %v, want %v", tt.about, err, tt.err)
		case tt.err == nil && (s.Name != strings.TrimSpace(tt.dir) || s.Description != tt.desc || !equalMeta(s.Metadata, tt.meta)):
			t.Errorf("%s: skill %q %q %v", tt.about, s.Name, s.Description, s.Metadata)
		}
	}
}

// sameReasons reports whether err wraps exactly the reasons of want.
func sameReasons(err, want error) bool {
	reasons := func(e error) []error {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
		return []error{e}
	}
	got, w := reasons(err), reasons(want)
	return slices.Equal(got, w)
}

func equalMeta(a, b map[string]string) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBody(t *testing.T) {
	root := t.TempDir()
	const doc = `
a:
  str: text
  yes: true
  no: false
  int: 42
  float: 1.5
  whole: 2.0
  list: [x, z]
  map: {k: v}
  dollar: "$SKILL_DIR/bin"
`
	body := strings.Join([]string{
		"s=${config.a.str} ${ config.a.str }",
		"b=${config.a.yes}/${config.a.no}",
		"n=${config.a.int} ${config.a.float} ${config.a.whole}",
		"l=${config.a.list}",
		"m=${config.a.map}",
		"missing=[${config.a.nope}] [${config.nope.deeper}]",
		"after=${config.a.dollar}",
		"dir=$SKILL_DIR ${SKILL_DIR} $SKILL_DIRX",
		"py=$PYTHON",
		"kept=$HOME ${HOME} $1 $ $$ ${config}",
	}, "\n")
	path := simpleSkill(t, root, "demo", "d", "\n  "+body+"  \n\n")
	dir := filepath.Dir(path)
	c := New(Options{Home: t.TempDir(), Builtin: []string{root}, Config: configLookup(t, doc, envMap(nil)), Python: "/opt/py"})
	s := discoverOne(t, c, "demo")
	want := strings.Join([]string{
		"s=text text",
		"b=true/false",
		"n=42 1.5 2.0",
		"l=- x\n- z",
		"m=k: v",
		"missing=[] []",
		"after=" + dir + "/bin",
		"dir=" + dir + " " + dir + " $SKILL_DIRX",
		"py=/opt/py",
		"kept=$HOME ${HOME} $1 $ $ ${config}",
	}, "\n")
	if got := s.Body(); got != want {
		t.Errorf("body =\n%s\nwant\n%s", got, want)
	}

	// No config lookup: every reference is unset.
	c = New(Options{Home: t.TempDir(), Builtin: []string{root}, Python: "/opt/py"})
	if got := discoverOne(t, c, "demo").Body(); !strings.HasPrefix(got, "s= \nb=/\n") {
		t.Errorf("body without config = %q", got)
	}
}

// TestPython: without Options.Python, $PYTHON is python3 from PATH, and
// stays when PATH has no interpreter.
func TestPython(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	simpleSkill(t, root, "demo", "d", "run $PYTHON x.py")
	writeFile(t, filepath.Join(bin, "python3"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(bin, "python3"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	c := New(Options{Home: t.TempDir(), Builtin: []string{root}})
	if got, want := discoverOne(t, c, "demo").Body(), "run "+filepath.Join(bin, "python3")+" x.py"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	t.Setenv("PATH", t.TempDir())
	c = New(Options{Home: t.TempDir(), Builtin: []string{root}})
	if got := discoverOne(t, c, "demo").Body(); got != "run $PYTHON x.py" {
		t.Errorf("body without python = %q", got)
	}
}

func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{0: "0.0", 1: "1.0", -2.5: "-2.5", 0.1: "0.1", 1e15: "1000000000000000.0", 1e16: "1e+16", 1.5e-5: "1.5e-05", 0.0001: "0.0001"} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func discoverOne(t *testing.T, c *Catalog, name string) Skill {
	t.Helper()
	list, err := c.Discover(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, ok := byName(list)[name]
	if !ok {
		t.Fatalf("skill %s not discovered: %v", name, names(list))
	}
	return s
}

// TestDiscover covers the roots' precedence (project, legacy project,
// global, builtin in order), name order inside a root, what is not a
// skill, symbolic links and the legacy warning.
func TestDiscover(t *testing.T) {
	tmp := t.TempDir()
	ws, home := filepath.Join(tmp, "ws"), filepath.Join(tmp, "home")
	b1, b2 := filepath.Join(tmp, "b1"), filepath.Join(tmp, "b2")
	project, legacy, global := filepath.Join(ws, ProjectDir), filepath.Join(ws, LegacyProjectDir), filepath.Join(home, ProjectDir)
	simpleSkill(t, project, "one", "project one", "")
	simpleSkill(t, legacy, "one", "legacy one", "")
	simpleSkill(t, legacy, "two", "legacy two", "")
	simpleSkill(t, global, "two", "global two", "")
	simpleSkill(t, global, "three", "global three", "")
	simpleSkill(t, b1, "three", "b1 three", "")
	simpleSkill(t, b1, "four", "b1 four", "")
	simpleSkill(t, b2, "four", "b2 four", "")
	simpleSkill(t, b2, "five", "b2 five", "")
	// Not skills: a file, a directory without SKILL.md, a SKILL.md that is
	// a directory, an invalid skill.
	writeFile(t, filepath.Join(project, "README.md"), "no skill")
	if err := os.MkdirAll(filepath.Join(project, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(project, "odd", FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	simpleSkill(t, project, "Upper", "bad name", "")
	// A linked skill directory: found under its link's name, located at
	// its target.
	target := filepath.Join(tmp, "elsewhere", "linked")
	simpleSkill(t, filepath.Dir(target), "linked", "linked skill", "")
	if err := os.Symlink(target, filepath.Join(global, "linked")); err != nil {
		t.Fatal(err)
	}

	var logs proctest.Buffer
	c := New(Options{Home: home, Builtin: []string{b1, b2}, Log: debugLogger(&logs)})
	for range 2 {
		list, err := c.Discover(t.Context(), ws)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := names(list), []string{"five", "four", "linked", "one", "three", "two"}; !slices.Equal(got, want) {
			t.Fatalf("skills %v, want %v", got, want)
		}
		idx := byName(list)
		for name, want := range map[string]string{"one": "project one", "two": "legacy two", "three": "global three", "four": "b1 four", "five": "b2 five"} {
			if idx[name].Description != want {
				t.Errorf("%s = %q, want %q", name, idx[name].Description, want)
			}
		}
		if idx["two"].Source != SourceProject || idx["linked"].Source != SourceGlobal {
			t.Errorf("sources: two %s, linked %s", idx["two"].Source, idx["linked"].Source)
		}
		realTarget, _ := filepath.EvalSymlinks(target)
		if idx["linked"].Location != filepath.Join(realTarget, FileName) {
			t.Errorf("linked location %q", idx["linked"].Location)
		}
	}
	if n := strings.Count(logs.String(), "skills.legacy_dir"); n != 1 || !strings.Contains(logs.String(), legacy) {
		t.Errorf("legacy warnings %d (want 1):\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "skills.invalid"); n != 1 {
		t.Errorf("invalid-skill logs %d (want 1: the parse is cached):\n%s", n, logs.String())
	}

	// Without any root there is no skill and no error.
	list, err := New(Options{Home: filepath.Join(tmp, "none")}).Discover(t.Context(), filepath.Join(tmp, "none"))
	if err != nil || len(list) != 0 {
		t.Errorf("Discover without roots = %v, %v", names(list), err)
	}
}

// TestCache: a SKILL.md is parsed again when its modification time or
// size changes, and not otherwise.
func TestCache(t *testing.T) {
	root := t.TempDir()
	path := simpleSkill(t, root, "demo", "aaaa", "body")
	c := New(Options{Home: t.TempDir(), Builtin: []string{root}})
	if d := discoverOne(t, c, "demo").Description; d != "aaaa" {
		t.Fatalf("description %q", d)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, same modification time: the cached parse stands.
	simpleSkill(t, root, "demo", "bbbb", "body")
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if d := discoverOne(t, c, "demo").Description; d != "aaaa" {
		t.Fatalf("description %q, want the cached aaaa", d)
	}
	// A new modification time: parsed again.
	later := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if d := discoverOne(t, c, "demo").Description; d != "bbbb" {
		t.Fatalf("description %q, want bbbb", d)
	}
	// A new size (same time): parsed again; now invalid, so gone.
	simpleSkill(t, root, "demo", "", "body")
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	list, err := c.Discover(t.Context(), t.TempDir())
	if err != nil || len(list) != 0 {
		t.Fatalf("after invalidating: %v, %v", names(list), err)
	}
}

func TestDiscoverCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := New(Options{Home: t.TempDir()}).Discover(ctx, t.TempDir()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Discover with a cancelled context = %v", err)
	}
}

// TestPrompt pins the block's text, $name expansion and allowed_skills.
func TestPrompt(t *testing.T) {
	ws := t.TempDir()
	project := filepath.Join(ws, ProjectDir)
	a := simpleSkill(t, project, "skill-a", "desc a", "Use $SKILL_DIR/run.sh")
	b := simpleSkill(t, project, "skill-b", "desc b", "")
	simpleSkill(t, project, "telegram", "Telegram replies", "send it")
	c := New(Options{Home: t.TempDir()})
	state := func(allowed any) *bub.State {
		m := map[string]any{bub.StateWorkspace: ws}
		if allowed != nil {
			m[bub.StateAllowedSkills] = allowed
		}
		return bub.NewState(m)
	}

	tests := []struct {
		about, prompt string
		state         *bub.State
		want          string
	}{
		{about: "none expanded", prompt: "hello $nobody", state: state(nil),
			want: "<available_skills>\n- skill-a: desc a\n- skill-b: desc b\n- telegram: Telegram replies\n</available_skills>"},
		{about: "two expanded, one without body", prompt: "use $skill-a and $skill-b please", state: state(nil),
			want: "<available_skills>\n- skill-a: desc a\n  Location: " + a + "\nUse " + filepath.Dir(a) + "/run.sh\n- skill-b: desc b\n  Location: " + b + "\n- telegram: Telegram replies\n</available_skills>"},
		{about: "builtin prompt's channel hint", prompt: "[channel=$telegram]\nhi", state: state(nil),
			want: "<available_skills>\n- skill-a: desc a\n- skill-b: desc b\n- telegram: Telegram replies\n  Location: " + filepath.Join(project, "telegram", FileName) + "\nsend it\n</available_skills>"},
		{about: "hints are exact tokens", prompt: "$Skill-A $skill-a. $telegramX $$skill-b", state: state(nil),
			want: "<available_skills>\n- skill-a: desc a\n- skill-b: desc b\n  Location: " + b + "\n- telegram: Telegram replies\n</available_skills>"},
		{about: "allowed_skills filters", prompt: "$skill-a", state: state([]string{"SKILL-B", "telegram"}),
			want: "<available_skills>\n- skill-b: desc b\n- telegram: Telegram replies\n</available_skills>"},
		{about: "allowed_skills from JSON", prompt: "", state: state([]any{"skill-a", 7}),
			want: "<available_skills>\n- skill-a: desc a\n</available_skills>"},
		{about: "nothing allowed", prompt: "$skill-a", state: state([]string{}), want: ""},
	}
	for _, tt := range tests {
		got, err := c.Prompt(t.Context(), tt.prompt, tt.state)
		if err != nil || got != tt.want {
			t.Errorf("%s: Prompt =\n%s\n(err %v) want\n%s", tt.about, got, err, tt.want)
		}
	}
	if got := Render(nil, map[string]bool{"x": true}); got != "" {
		t.Errorf("Render(nil) = %q", got)
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		about string
		state *bub.State
		want  map[string]bool
	}{
		{about: "no state", state: nil, want: map[string]bool{"a": true, "b": true}},
		{about: "no key", state: bub.NewState(nil), want: map[string]bool{"a": true, "b": true}},
		{about: "nil value", state: bub.NewState(map[string]any{bub.StateAllowedSkills: nil}), want: map[string]bool{"a": true, "b": true}},
		{about: "strings, case-folded", state: bub.NewState(map[string]any{bub.StateAllowedSkills: []string{"A"}}), want: map[string]bool{"a": true, "A": true, "b": false}},
		{about: "JSON list", state: bub.NewState(map[string]any{bub.StateAllowedSkills: []any{"b", 1}}), want: map[string]bool{"a": false, "b": true}},
		{about: "empty list", state: bub.NewState(map[string]any{bub.StateAllowedSkills: []string{}}), want: map[string]bool{"a": false}},
		{about: "not a list", state: bub.NewState(map[string]any{bub.StateAllowedSkills: "a"}), want: map[string]bool{"a": false}},
	}
	for _, tt := range tests {
		for name, want := range tt.want {
			if got := Allowed(tt.state, name); got != want {
				t.Errorf("%s: Allowed(%q) = %v", tt.about, name, got)
			}
		}
	}
}
