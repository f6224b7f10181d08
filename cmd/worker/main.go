// Command worker is the Bub worker service. See `worker --help`.
package main

import (
	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/cli"
)

func main() { cli.Main(bubcmd.Service(bubcmd.NewWorker)) }
