package stack

import "github.com/bubbus/bub/internal/service"

// Conns returns the services' connections, for tests that act on them.
func (r *Running) Conns() []*service.Conn { return r.conns }
