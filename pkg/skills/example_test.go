package skills_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/skills"
)

func ExampleCatalog_Prompt() {
	ws, err := os.MkdirTemp("", "workspace")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)
	dir := filepath.Join(ws, skills.ProjectDir, "release-notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	md := "---\nname: release-notes\ndescription: Write release notes.\n---\nToken: ${config.git.token}\n"
	if err := os.WriteFile(filepath.Join(dir, skills.FileName), []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}

	catalog := skills.New(skills.Options{
		Home: filepath.Join(ws, "home"), // an empty home: no global skills
		Config: func(path string) (any, bool) {
			return map[string]any{"git.token": "t0k"}[path], path == "git.token"
		},
	})
	state := bub.NewState(map[string]any{bub.StateWorkspace: ws})
	block, err := catalog.Prompt(context.Background(), "hello", state)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(block)

	list, _ := catalog.Visible(context.Background(), ws, state)
	fmt.Println(list[0].Source, list[0].Body())
	// Output:
	// <available_skills>
	// - release-notes: Write release notes.
	// </available_skills>
	// project Token: t0k
}
