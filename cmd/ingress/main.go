// Command ingress accepts envelopes over HTTP (JSON or CloudEvents) and
// publishes them to the Bub inbound stream. See `ingress --help`.
package main

import (
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/service"
)

func main() { service.Main(ingresscmd.Service) }
