package natstest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/freeport"
)

// Cluster is a JetStream cluster of in-process servers on loopback.
type Cluster struct {
	Servers []*Server
	// URL lists every server's client URL, comma-separated (what
	// BUB_NATS_URL takes).
	URL string
}

// StartCluster runs size JetStream servers named n1…n<size> in one
// cluster "bub" on loopback (routes between all), waits until they have
// elected a meta leader and shuts them down when the test ends.
func StartCluster(t testing.TB, size int) *Cluster {
	t.Helper()
	return StartClusterWith(t, size, func(int) *server.Options { return &server.Options{} })
}

// StartClusterWith is [StartCluster] with each server's options from
// base(i) (i from 0), e.g. a parsed configuration file: the cluster's
// listen address and routes are replaced by loopback ones, a missing
// server name becomes n<i+1> and a missing cluster name "bub".
func StartClusterWith(t testing.TB, size int, base func(i int) *server.Options) *Cluster {
	t.Helper()
	ports := freePorts(t, size)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	c := &Cluster{}
	var urls []string
	for i, p := range ports {
		opts := base(i)
		if opts.ServerName == "" {
			opts.ServerName = fmt.Sprintf("n%d", i+1)
		}
		if opts.Cluster.Name == "" {
			opts.Cluster.Name = "bub"
		}
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", p
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		s := StartWithOptions(t, opts)
		c.Servers = append(c.Servers, s)
		urls = append(urls, s.URL)
	}
	c.URL = strings.Join(urls, ",")
	c.waitReady(t)
	return c
}

// JetStream returns a JetStream context on a new connection to every
// server of c, with opts (closed when the test ends).
func (c *Cluster) JetStream(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		t.Fatalf("natstest: connect to the cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// Restart starts server i of c again (after it was shut down) on the same
// ports, store and routes, and waits until the cluster is ready again.
func (c *Cluster) Restart(t testing.TB, i int) *Server {
	t.Helper()
	c.Servers[i] = c.Servers[i].Restart(t)
	c.waitReady(t)
	return c.Servers[i]
}

// waitReady waits up to 30s for [Cluster.ready].
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !c.ready() {
		if time.Now().After(deadline) {
			t.Fatal("natstest: within 30s the cluster had no JetStream meta leader seeing every server online")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready reports whether every server is current and a meta leader sees
// every server as a peer it can place assets on (online, with JetStream
// and its stats received): until then a stream of as many replicas as
// servers fails with "no suitable peers for placement, peer offline".
func (c *Cluster) ready() bool {
	leader := false
	for _, s := range c.Servers {
		if !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() {
			leader = len(s.JetStreamClusterPeers()) == len(c.Servers)
		}
	}
	return leader
}

// freePorts returns n distinct loopback ports nothing listens on (the
// route ports must be known before the servers start; see package
// freeport).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeport.Ports(n)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return ports
}

// StreamLeader returns the server of c that leads stream, waiting up to
// 30s for the stream to have a leader.
func (c *Cluster) StreamLeader(t testing.TB, js jetstream.JetStream, stream string) *Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := js.Stream(t.Context(), stream)
		if err == nil {
			if info, err := st.Info(t.Context()); err == nil && info.Cluster != nil {
				for _, s := range c.Servers {
					if s.Name() == info.Cluster.Leader {
						return s
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("natstest: stream %s has no leader within 30s", stream)
	return nil
}

// WaitCurrent waits up to a minute until every stream (KV buckets
// included) and every durable consumer has a leader and all its
// replicas current (caught up with the leader), so that losing one more
// server keeps each of them a quorum.
func (c *Cluster) WaitCurrent(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	Eventually(t, time.Minute, func() (bool, string) {
		streams := js.ListStreams(t.Context())
		for info := range streams.Info() {
			if ok, why := current(info.Config.Name, info.Cluster, info.Config.Replicas); !ok {
				return false, why
			}
			st, err := js.Stream(t.Context(), info.Config.Name)
			if err != nil {
				return false, err.Error()
			}
			consumers := st.ListConsumers(t.Context())
			for ci := range consumers.Info() {
				if ci.Config.Durable == "" {
					continue
				}
				if ok, why := current(info.Config.Name+"/"+ci.Name, ci.Cluster, ci.Config.Replicas); !ok {
					return false, why
				}
			}
			if err := consumers.Err(); err != nil {
				return false, err.Error()
			}
		}
		if err := streams.Err(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// current reports whether a stream or consumer of replicas replicas has
// a leader and every other replica current.
func current(name string, ci *jetstream.ClusterInfo, replicas int) (bool, string) {
	if replicas <= 1 {
		return true, ""
	}
	if ci == nil || ci.Leader == "" {
		return false, name + " has no leader"
	}
	n := 0
	for _, r := range ci.Replicas {
		if !r.Current || r.Offline {
			return false, fmt.Sprintf("%s replica %s is not current", name, r.Name)
		}
		n++
	}
	return n == replicas-1, fmt.Sprintf("%s has %d of %d replicas", name, n+1, replicas)
}
