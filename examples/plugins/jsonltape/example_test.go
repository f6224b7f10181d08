package jsonltape_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bubbus/bub/examples/plugins/jsonltape"
	"github.com/bubbus/bub/pkg/tape"
)

func ExampleNewStore() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tapes")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := jsonltape.NewStore(dir)
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)

	e := tape.MessageEntry(map[string]any{"role": "user", "content": "grüß dich"})
	e.Date = "2026-05-14T10:11:12+00:00"
	if _, err := s.Append(ctx, "telegram:42", []tape.Entry{e}, tape.WithCommitID("run-1")); err != nil {
		panic(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "telegram%3A42.jsonl"))
	if err != nil {
		panic(err)
	}
	fmt.Print(string(data))
	// Output:
	// {"id": 1, "kind": "message", "payload": {"content": "grüß dich", "role": "user"}, "meta": {}, "date": "2026-05-14T10:11:12+00:00"}
}

func ExampleNew() {
	p := jsonltape.New("/var/lib/bub/tapes")
	fmt.Println(p.Name(), "-", p.Describe().Detail)
	// Output: jsonltape - JSONL tape store in /var/lib/bub/tapes
}
