// Command bub is the all-in-one Bub CLI: `bub run`, `bub up`, `bub tape`,
// `bub events tail`, `bub hooks` and more. See `bub --help`.
package main

import (
	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/cli"
)

func main() { cli.Main(bubcmd.NewBub) }
