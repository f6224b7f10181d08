// Command recorder is the Bub recorder service. See `recorder --help`.
package main

import (
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
)

func main() { service.Main(recordercmd.Service) }
