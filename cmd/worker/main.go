// Command worker is the Bub worker service. See `worker --help`.
package main

import (
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/workercmd"
)

func main() { service.Main(workercmd.Service) }
