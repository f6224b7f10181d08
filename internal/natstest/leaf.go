package natstest

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartHubAndLeaf runs a hub server with JetStream in domain and a leaf
// node connected to it with a JetStream of its own (domain "leaf"), and
// waits until the leaf connection is up. Clients of the leaf reach the
// hub's streams and buckets through the domain's API prefix
// ($JS.<domain>.API).
func StartHubAndLeaf(t testing.TB, domain string) (hub, leaf *Server) {
	t.Helper()
	port := freePorts(t, 1)[0]
	hub = StartWithOptions(t, &server.Options{ServerName: "hub", JetStreamDomain: domain,
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: port}})
	remote, err := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	leaf = StartWithOptions(t, &server.Options{ServerName: "leaf", JetStreamDomain: "leaf",
		LeafNode: server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}}})
	Eventually(t, 30*time.Second, func() (bool, string) {
		return hub.NumLeafNodes() == 1 && leaf.NumLeafNodes() == 1, "the leaf node is not connected to the hub"
	})
	return hub, leaf
}
