// Command ingress accepts envelopes over HTTP (JSON or CloudEvents) and
// publishes them to the Bub inbound stream. See `ingress --help`.
package main

import (
	"github.com/bubbus/bub/internal/bubcmd"
	"github.com/bubbus/bub/internal/cli"
)

func main() { cli.Main(bubcmd.Service(bubcmd.NewIngress)) }
