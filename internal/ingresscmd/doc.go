// Package ingresscmd is the ingress service as cmd/ingress, `bub ingress`
// and `bub up` run it: its flags ([Bind]), its [service.Spec] ([Service])
// and how it serves on a connection ([Run]: the topology, the publishing
// gateway and the HTTP API with its readiness check).
//
// Looking for the HTTP API itself? See internal/ingress. For the shell
// around it (common flags, telemetry, connect, drain) see
// internal/service.
package ingresscmd
