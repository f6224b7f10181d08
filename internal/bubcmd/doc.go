// Package bubcmd builds the cobra commands of every binary: the bub CLI
// (run, up, tape, events, hooks, …) and the ingress, worker and recorder
// services. Each cmd/*/main.go is one call to cli.Main with a constructor
// from here.
//
// Start with [NewBub]. Looking for what a service does once started? See
// internal/stack and the service packages it wires.
package bubcmd
