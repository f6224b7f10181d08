package stacktest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools/mcptools"
)

// Wait bounds every wait of the package (a turn, the recorder).
const Wait = 30 * time.Second

// Options configures [Start].
type Options struct {
	// Script is the fake model's script.
	Script fakellm.Script
	// Plugins are the workers' local plugins (after the builtin one).
	Plugins []hooks.Plugin
	// Interceptors are the workers' remote interceptor services (after
	// Plugins).
	Interceptors []remote.Config
	// Instance names the services (default "t"): workers are
	// "<instance>-w0", …
	Instance string
	// MCP are the MCP servers the worker starts.
	MCP []mcptools.Server
	// Workers is the number of worker instances (default 1).
	Workers int
	// Servers, when above 1, runs a JetStream cluster of that many
	// servers ([natstest.StartCluster]) with every stream, bucket and
	// shared consumer replicated on each, instead of one server.
	Servers int
	// Domain, when set, puts the JetStream in a hub with that JetStream
	// domain and connects every service to a leaf node of it (with a
	// JetStream of its own), using the hub's through BUB_JS_DOMAIN
	// ([natstest.StartHubAndLeaf]).
	Domain string
	// MaxPayload is the largest message the (single) server takes, its
	// max_payload (default natsx.MaxPayload, as Bub's servers).
	MaxPayload int32
	// Log receives the services' logs (nil = discarded).
	Log *slog.Logger
}

// Cluster is a running in-process cluster.
type Cluster struct {
	// NATS is the embedded server (the first one of a cluster).
	NATS *natstest.Server
	// Hub is the hub of [Options.Domain] (NATS is its leaf node).
	Hub *natstest.Server
	// Servers is the cluster of [Options.Servers] (nil for one server).
	Servers *natstest.Cluster
	// Conn is the test's own service connection.
	Conn *service.Conn
	// LLM is the fake model every worker calls.
	LLM *fakellm.Server
	// Gateway publishes inbound envelopes and awaits their replies.
	Gateway *ingress.Gateway
}

// Start runs a recorder and o.Workers workers (model "openai:fake" on the fake
// server), each over its own connection, waits until they created their
// streams and consumers, and stops them when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Instance == "" {
		o.Instance = "t"
	}
	o.Workers = max(o.Workers, 1)
	var (
		srv, hub *natstest.Server
		servers  *natstest.Cluster
		url      string
	)
	topo := natsx.Topology{MemoryStorage: true}
	if o.Servers > 1 {
		servers = natstest.StartCluster(t, o.Servers)
		srv, url, topo.Replicas = servers.Servers[0], servers.URL, o.Servers
	} else if o.Domain != "" {
		hub, srv = natstest.StartHubAndLeaf(t, o.Domain)
		url = srv.URL
	} else {
		if o.MaxPayload == 0 {
			o.MaxPayload = natsx.MaxPayload
		}
		srv = natstest.StartWithOptions(t, &server.Options{MaxPayload: o.MaxPayload})
		url = srv.URL
	}
	fake, base := fakellm.Start(t, o.Script)
	common := &cli.Common{Home: t.TempDir(), Prefix: "bub", LogLevel: "info", LogFormat: "text", NATS: natsx.ClientConfig{URL: url}, Topology: topo, JSDomain: o.Domain}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := stack.Open(common, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	running, err := stack.StartServices(t.Context(), cl, stack.Services{
		Workers: o.Workers,
		Worker: workercmd.Options{Topology: topo, Instance: o.Instance, Workspace: t.TempDir(), Plugins: o.Plugins, Interceptors: o.Interceptors, MCP: o.MCP,
			Models: llm.Config{Model: "openai:fake", APIBase: base, APIKey: "x"}},
		Recorder: &recordercmd.Options{Topology: topo, Instance: o.Instance},
	}, o.Log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := running.Stop(); err != nil {
			t.Errorf("stopping the services: %v", err)
		}
	})
	// Ready: every worker consumes (none is still provisioning).
	natstest.Eventually(t, Wait, func() (bool, string) {
		if err := running.Ready(t.Context()); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	conn, err := cl.Connect(t.Context(), "stacktest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	// Ready: the services created their streams and consumers.
	natstest.Eventually(t, Wait, func() (bool, string) {
		if _, err := conn.JS.Consumer(t.Context(), conn.Names.InboundStream(), conn.Names.WorkerConsumer()); err != nil {
			return false, "worker consumer: " + err.Error()
		}
		if _, err := conn.JS.Consumer(t.Context(), conn.Names.EventsStream(), conn.Names.RecorderConsumer()); err != nil {
			return false, "recorder consumer: " + err.Error()
		}
		return true, ""
	})
	gw, err := ingress.NewGateway(conn.NC, conn.JS, conn.Names, events.Source("ingress", o.Instance), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	return &Cluster{NATS: srv, Hub: hub, Servers: servers, Conn: conn, LLM: fake, Gateway: gw}
}

// Turn publishes env and returns its replies.
func (c *Cluster) Turn(t testing.TB, env *envelope.Envelope) []envelope.Envelope {
	t.Helper()
	await := c.Gateway.Expect(env.ID)
	if _, err := c.Gateway.Publish(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	outs, err := await(ctx)
	if err != nil {
		t.Fatalf("reply to %s: %v", env.ID, err)
	}
	return outs
}

// Tape waits until the recorder took every event published so far and
// returns the entries of session's tape.
func (c *Cluster) Tape(t testing.TB, session string) []tape.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	if err := stack.WaitRecorded(ctx, c.Conn); err != nil {
		t.Fatal(err)
	}
	store, err := tape.NewJetStreamStore(ctx, c.Conn.JS, c.Conn.Names)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := store.Fetch(ctx, session, tape.All())
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
