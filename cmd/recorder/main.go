// Command recorder is the Bub recorder service. See `recorder --help`.
package main

import (
	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/cli"
)

func main() { cli.Main(bubcmd.Service(bubcmd.NewRecorder)) }
