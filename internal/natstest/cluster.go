package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	ports := make([]int, size)
	for i := range ports {
		ports[i] = freePort(t)
	}
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
	deadline := time.Now().Add(30 * time.Second)
	for !c.ready() {
		if time.Now().After(deadline) {
			t.Fatal("natstest: the cluster elected no JetStream meta leader within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// JetStream returns a JetStream context on a new connection to every
// server of c (closed when the test ends).
func (c *Cluster) JetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.URL)
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

// ready reports whether a meta leader exists and every server is current.
func (c *Cluster) ready() bool {
	leader := false
	for _, s := range c.Servers {
		if !s.JetStreamIsCurrent() {
			return false
		}
		leader = leader || s.JetStreamIsLeader()
	}
	return leader
}

// freePort returns a loopback port nothing listens on (the route ports
// must be known before the servers start).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
