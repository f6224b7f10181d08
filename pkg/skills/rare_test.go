package skills

import (
	"context"
	"path/filepath"
	"testing"
)

// TestSkillLineEndings (failed before its fix): spec §8.4 "Valid skill: `<dir>/SKILL.md` whose
// first line is `---` …" and "Body: file text trimmed, first front-matter
// block removed, trimmed". Bub reads SKILL.md with Path.read_text, i.e.
// Python's universal newlines: "\r\n" and a lone "\r" both become "\n"
// before the front matter is looked for and before the body is returned.
//
// Sequence: a SKILL.md written with CR-only line ends
// ("---\rname: cr-skill\rdescription: d\r---\rline1\rline2\r") and one with
// CRLF ends; Discover; Body.
// Expected (Bub): both skills valid, both bodies "line1\nline2". Go splits
// only at "\n": the CR-only skill has no front matter (skipped as
// invalid) and the CRLF body keeps its "\r" characters.
func TestSkillLineEndings(t *testing.T) {
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	project := filepath.Join(ws, ProjectDir)
	writeFile(t, filepath.Join(project, "cr-skill", FileName), "---\rname: cr-skill\rdescription: d\r---\rline1\rline2\r")
	writeFile(t, filepath.Join(project, "crlf-skill", FileName), "---\r\nname: crlf-skill\r\ndescription: d\r\n---\r\nline1\r\nline2\r\n")
	list, err := New(Options{Home: filepath.Join(tmp, "home")}).Discover(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	got := byName(list)
	for _, name := range []string{"cr-skill", "crlf-skill"} {
		s, ok := got[name]
		if !ok {
			t.Errorf("%s: not discovered (found %v)", name, names(list))
			continue
		}
		if body := s.Body(); body != "line1\nline2" {
			t.Errorf("%s: Body = %q, want %q", name, body, "line1\nline2")
		}
	}
}
