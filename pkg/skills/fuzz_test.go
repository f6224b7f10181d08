package skills

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSkillFile feeds arbitrary SKILL.md text (and directory names) to
// the front matter parser and validator: they never panic, and whatever
// they accept obeys every rule of a valid skill.
func FuzzSkillFile(f *testing.F) {
	for _, seed := range []struct{ dir, text string }{
		{"demo", "---\nname: demo\ndescription: d\n---\nbody $SKILL_DIR ${config.a.b}"},
		{"demo", "---\nname: demo\ndescription: d\nmetadata:\n  k: v\n---"},
		{"demo", "---\nname: [broken\n---\n"},
		{"demo", "---\n---\n---"},
		{"demo", "---\na: &x [*x]\n---"},
		{"a-b", "\r\n---\r\nNAME: a-b\r\nDESCRIPTION: |\n  multi\n  line\n---\r\n"},
		{"x", "no front matter"},
		{"", ""},
	} {
		f.Add(seed.dir, seed.text)
	}
	f.Fuzz(func(t *testing.T, dir, text string) {
		p := parse(text)
		if p.body != strings.TrimSpace(p.body) {
			t.Fatalf("body %q is not trimmed", p.body)
		}
		s, err := newSkill(dir, text)
		if err != nil {
			return
		}
		switch {
		case s.Name != dir || !namePattern.MatchString(s.Name) || len(s.Name) > MaxNameLen:
			t.Fatalf("accepted name %q for directory %q", s.Name, dir)
		case s.Description == "" || s.Description != strings.TrimSpace(s.Description) || utf8.RuneCountInString(s.Description) > MaxDescriptionLen:
			t.Fatalf("accepted description %q", s.Description)
		case !utf8.ValidString(s.raw):
			t.Fatalf("accepted invalid UTF-8 body %q", s.raw)
		}
		_ = s.Body()
	})
}
