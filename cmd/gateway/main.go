// Command gateway is the Bub gateway service: it runs the enabled channels.
// See `gateway --help`.
package main

import (
	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/cli"
)

func main() { cli.Main(bubcmd.Service(bubcmd.NewGateway)) }
