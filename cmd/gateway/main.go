// Command gateway is the Bub gateway service: it runs the enabled channels.
// See `gateway --help`.
package main

import (
	"github.com/bubbus/bub/internal/gatewaycmd"
	"github.com/bubbus/bub/internal/service"
)

func main() { service.Main(gatewaycmd.Service) }
