package skills

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
)

// BenchmarkPrompt is the per-step cost of the skills block with ten
// project and ten global skills, one expanded: the roots listed and every
// SKILL.md stat'ed, none read again.
func BenchmarkPrompt(b *testing.B) {
	ws, home := b.TempDir(), b.TempDir()
	for i := range 10 {
		simpleSkill(b, filepath.Join(ws, ProjectDir), fmt.Sprintf("project-%d", i), "A project skill", "Body with $SKILL_DIR and ${config.a.b}.")
		simpleSkill(b, filepath.Join(home, ProjectDir), fmt.Sprintf("global-%d", i), "A global skill", "Body.")
	}
	c := New(Options{Home: home})
	state := bub.NewState(map[string]any{bub.StateWorkspace: ws})
	for b.Loop() {
		if _, err := c.Prompt(b.Context(), "use $project-3", state); err != nil {
			b.Fatal(err)
		}
	}
}
