package toolkit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tools"
)

// skillEnv is a registry whose skill tool reads the project skills of ws
// (alpha with a body, beta without) and one global skill (gamma).
type skillEnv struct {
	reg *tools.Registry
	ws  string
}

func newSkillEnv(t *testing.T) skillEnv {
	t.Helper()
	shells, err := NewShells()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shells.Close() })
	ws, home := t.TempDir(), t.TempDir()
	writeSkillFile(t, filepath.Join(ws, skills.ProjectDir, "alpha"), "name: alpha\ndescription: First", "Run $SKILL_DIR/go.sh")
	writeSkillFile(t, filepath.Join(ws, skills.ProjectDir, "beta"), "name: beta\ndescription: Second", "")
	writeSkillFile(t, filepath.Join(home, skills.ProjectDir, "gamma"), "name: gamma\ndescription: Third", "g")
	e := skillEnv{reg: &tools.Registry{}, ws: ws}
	if err := Register(e.reg, Options{Shells: shells, Skills: skills.New(skills.Options{Home: home})}); err != nil {
		t.Fatal(err)
	}
	return e
}

func writeSkillFile(t *testing.T, dir, front, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, skills.FileName), []byte("---\n"+front+"\n---\n"+body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSkill covers the skill tool's answers, allowed_skills
// included.
func TestSkill(t *testing.T) {
	e := newSkillEnv(t)
	alpha := filepath.Join(e.ws, skills.ProjectDir, "alpha")
	beta := filepath.Join(e.ws, skills.ProjectDir, "beta")
	tests := []struct {
		about   string
		args    map[string]any
		allowed any // the allowed_skills state value; nil: none set
		want    string
	}{
		{about: "list", args: map[string]any{}, want: "Available skills:\n- alpha\n- beta\n- gamma"},
		{about: "list allowed only", args: map[string]any{}, allowed: []string{"Beta"}, want: "Available skills:\n- beta"},
		{about: "list nothing allowed", args: map[string]any{}, allowed: []string{}, want: "Available skills:\n"},
		{about: "body", args: map[string]any{"name": "alpha"}, want: "Location: " + filepath.Join(alpha, skills.FileName) + "\n---\nRun " + alpha + "/go.sh"},
		{about: "any case", args: map[string]any{"name": "ALPHA"}, want: "Location: " + filepath.Join(alpha, skills.FileName) + "\n---\nRun " + alpha + "/go.sh"},
		{about: "no body", args: map[string]any{"name": "beta"}, want: "Location: " + filepath.Join(beta, skills.FileName) + "\n---\n(no content)"},
		{about: "unknown", args: map[string]any{"name": "delta"}, want: "(no such skill)"},
		{about: "empty name", args: map[string]any{"name": ""}, allowed: []string{"alpha"}, want: "(no such skill)"},
		{about: "allowed", args: map[string]any{"name": "Alpha"}, allowed: []any{"alpha"}, want: "Location: " + filepath.Join(alpha, skills.FileName) + "\n---\nRun " + alpha + "/go.sh"},
		{about: "not allowed", args: map[string]any{"name": "Beta"}, allowed: []string{"alpha"}, want: "(skill 'Beta' is not allowed in this context)"},
		{about: "unknown and not allowed", args: map[string]any{"name": "delta"}, allowed: []string{"alpha"}, want: "(skill 'delta' is not allowed in this context)"},
	}
	for _, tt := range tests {
		state := bub.NewState(nil)
		if tt.allowed != nil {
			state.Set(bub.StateAllowedSkills, tt.allowed)
		}
		tl, _ := e.reg.Get("skill")
		res, err := tools.Invoke(t.Context(), tl, &tools.Context{Workspace: e.ws, State: state}, tt.args)
		if err != nil || res != tt.want {
			t.Errorf("%s: skill(%v) = %q, %v; want %q", tt.about, tt.args, res, err, tt.want)
		}
	}
}

// TestSkillCommand: ",skill name=x" names the registered skill tool, so
// it runs that tool and not bash.
func TestSkillCommand(t *testing.T) {
	e := newSkillEnv(t)
	alpha := filepath.Join(e.ws, skills.ProjectDir, "alpha")
	for text, want := range map[string]string{
		",skill name=alpha": "Location: " + filepath.Join(alpha, skills.FileName) + "\n---\nRun " + alpha + "/go.sh",
		", skill alpha":     "Location: " + filepath.Join(alpha, skills.FileName) + "\n---\nRun " + alpha + "/go.sh",
		",skill":            "Available skills:\n- alpha\n- beta\n- gamma",
		",skill name=nope":  "(no such skill)",
	} {
		line, ok := tools.CommandLine(text)
		if !ok {
			t.Fatalf("%q is not a command", text)
		}
		inv, err := tools.ResolveCommand(e.reg, line)
		if err != nil || inv.Tool.Name != "skill" {
			t.Fatalf("%s resolves to %q, %v; want the skill tool", text, inv.Tool.Name, err)
		}
		res, berr := tools.Invoke(t.Context(), inv.Tool, &tools.Context{State: bub.NewState(map[string]any{bub.StateWorkspace: e.ws})}, inv.Args)
		if berr != nil || res != want {
			t.Errorf("%s = %q, %v; want %q", text, res, berr, want)
		}
	}
}
