// Package freeport picks loopback TCP ports for the servers that tests and
// the benchmark harness start and must name before they start: NATS
// client and route ports, HTTP listen addresses.
//
// Picking a port by listening on "127.0.0.1:0" and closing the listener
// goes wrong two ways:
//
//   - The kernel's picks repeat: 6,000 picks in a row on this project's
//     CI machine gave 1,960 ports already given, some twice in a row. Two
//     servers planned with separate picks (a cluster's client and route
//     ports) can get the same port, and one fails with "address already
//     in use".
//   - The picks come from the ephemeral range, from which outgoing
//     connections take their source ports, so a connection (a NATS route
//     dialling a server that is not up yet, a new source port each
//     attempt) can take a picked port before its server binds it.
//
// So [Ports] picks ports at random below the ephemeral range (Linux's
// net.ipv4.ip_local_port_range), holding each open until all n are
// picked so they are distinct, and only falls back to the kernel's choice
// where it cannot read that range.
package freeport
