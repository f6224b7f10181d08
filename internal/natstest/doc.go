// Package natstest starts a real embedded nats-server with JetStream for
// tests: a random loopback port, a store under t.TempDir() and shutdown in
// t.Cleanup. No test in this repository mocks NATS.
//
// Start with [Start], then [Server.Conn] and [Server.JetStream];
// [StartCluster] runs a JetStream cluster of in-process servers;
// [StartHubAndLeaf] a hub with a JetStream domain and a leaf node of it.
package natstest
