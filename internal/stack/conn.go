package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/subjects"
)

// Conn is a NATS connection with JetStream and the deployment's names.
type Conn struct {
	NC    *nats.Conn
	JS    jetstream.JetStream
	Names subjects.Names
	// Topology is the deployment's topology from the configuration; a
	// service whose options name none uses it.
	Topology natsx.Topology
}

// topology returns t, or the connection's topology when t is zero.
func (c *Conn) topology(t natsx.Topology) natsx.Topology {
	if t == (natsx.Topology{}) {
		return c.Topology
	}
	return t
}

// Cluster is where a process's connections come from: an existing cluster
// (URL) or an embedded server it owns.
type Cluster struct {
	common   *cli.Common
	embedded *natsx.Embedded
	log      *slog.Logger
}

// ErrNoURL is returned when a service that cannot embed NATS has no URL.
var ErrNoURL = errors.New("no NATS URL: set --nats or BUB_NATS_URL")

// Open returns the cluster of c. With no URL and embed set, it starts the
// embedded server storing data under <home>/nats and listening on listen
// ("" = in-process connections only).
func Open(c *cli.Common, embed bool, listen string, log *slog.Logger) (*Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl := &Cluster{common: c, log: log}
	if c.NATS.URL != "" {
		return cl, nil
	}
	if !embed {
		return nil, ErrNoURL
	}
	e, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: filepath.Join(c.Home, "nats"), Listen: listen})
	if err != nil {
		return nil, err
	}
	cl.embedded = e
	log.Info("nats.embedded", "store", filepath.Join(c.Home, "nats"), "url", e.ClientURL())
	return cl, nil
}

// URL returns the client URL of the cluster ("" for an embedded server
// without a listener).
func (cl *Cluster) URL() string {
	if cl.embedded != nil {
		return cl.embedded.ClientURL()
	}
	return cl.common.NATS.URL
}

// Embedded reports whether this process owns the server.
func (cl *Cluster) Embedded() bool { return cl.embedded != nil }

// Connect opens a connection named name (in-process for an embedded
// server).
func (cl *Cluster) Connect(ctx context.Context, name string) (*Conn, error) {
	var nc *nats.Conn
	var err error
	if cl.embedded != nil {
		nc, err = cl.embedded.Connect(name)
	} else {
		cfg := cl.common.NATS
		cfg.Name = name
		nc, err = natsx.Connect(ctx, cfg, cl.log)
	}
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Conn{NC: nc, JS: js, Names: cl.common.Names(), Topology: cl.common.Topology}, nil
}

// Close drains c: pending publishes are flushed and subscriptions end.
func (c *Conn) Close() {
	done := make(chan struct{})
	c.NC.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := c.NC.Drain(); err != nil {
		c.NC.Close()
		return
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.NC.Close()
	}
}

// Shutdown stops an owned embedded server; call it after every connection
// is closed.
func (cl *Cluster) Shutdown() {
	if cl.embedded != nil {
		cl.embedded.Shutdown()
	}
}

var errNotConnected = errors.New("not connected to NATS")
