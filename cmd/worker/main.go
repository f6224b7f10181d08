// Command worker is the Bub worker service. See `worker --help`.
package main

import (
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/internal/service"
)

func main() { service.Main(workercmd.Service) }
