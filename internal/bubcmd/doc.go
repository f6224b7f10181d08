// Package bubcmd builds the cobra commands of the bub CLI: run, up, chat,
// tape, events, hooks, bench, fakellm, … and the services (`bub worker`,
// `bub ingress`, `bub recorder`, `bub gateway`), which are cobra commands
// over the same service.Spec and shell (internal/service) as the service
// binaries. Only cmd/bub and pkg/app reach it.
//
// Start with [NewBub]. Looking for what a service does once started? See
// internal/workercmd, internal/ingresscmd, internal/recordercmd and
// internal/gatewaycmd; for several in one process, internal/stack.
package bubcmd
