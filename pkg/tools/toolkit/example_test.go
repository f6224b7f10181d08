package toolkit_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/bubbus/bub/pkg/tools"
	"github.com/bubbus/bub/pkg/tools/toolkit"
)

func Example() {
	shells, err := toolkit.NewShells()
	if err != nil {
		log.Fatal(err)
	}
	defer shells.Close() // on worker shutdown: stops every background shell

	var reg tools.Registry
	if err := toolkit.Register(&reg, toolkit.Options{Shells: shells}); err != nil {
		log.Fatal(err)
	}
	ws, err := os.MkdirTemp("", "workspace")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)
	tc := &tools.Context{SessionID: "cli:local", Workspace: ws}

	// A comma command, as a user types it.
	line, _ := tools.CommandLine(",fs.write path=notes/a.txt content='hello'")
	inv, _ := tools.ResolveCommand(&reg, line)
	if _, err := tools.Invoke(context.Background(), inv.Tool, tc, inv.Args); err != nil {
		log.Fatal(err)
	}

	// A model's tool call, by model-facing name.
	bash, _ := reg.Lookup("bash")
	out, _ := tools.Invoke(context.Background(), bash, tc, map[string]any{"cmd": "cat notes/a.txt"})
	fmt.Println(out)

	fsRead, _ := reg.Lookup("fs_read")
	_, berr := tools.Invoke(context.Background(), fsRead, tc, map[string]any{"path": "../etc/passwd"})
	fmt.Println(berr.Kind)
	// Output:
	// hello
	// invalid_input
}
