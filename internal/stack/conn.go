package stack

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/natsx/embedded"
	"github.com/bubbus/bub/internal/service"
)

// Cluster is where a process's connections come from: an existing cluster
// (URL) or an embedded server it owns.
type Cluster struct {
	common   *cli.Common
	embedded *embedded.Server
	log      *slog.Logger
}

// Open returns the cluster of c. With no URL and embed set, it starts the
// embedded server storing data under <home>/nats and listening on listen
// ("" = in-process connections only); with no URL and embed unset it
// returns service.ErrNoURL.
func Open(c *cli.Common, embed bool, listen string, log *slog.Logger) (*Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl := &Cluster{common: c, log: log}
	if c.NATS.URL != "" {
		return cl, nil
	}
	if !embed {
		return nil, service.ErrNoURL
	}
	interval, always, err := natsx.ParseSync(c.JSSync)
	if err != nil {
		return nil, fmt.Errorf("BUB_JS_SYNC: %w", err)
	}
	e, err := embedded.Start(embedded.Config{StoreDir: filepath.Join(c.Home, "nats"), Listen: listen, SyncAlways: always, SyncInterval: interval})
	if err != nil {
		return nil, err
	}
	cl.embedded = e
	log.Info("nats.embedded", "store", filepath.Join(c.Home, "nats"), "url", e.ClientURL(), "sync", orDefault(c.JSSync, "2m (default)"))
	return cl, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
func (cl *Cluster) Connect(ctx context.Context, name string) (*service.Conn, error) {
	if cl.embedded == nil {
		return service.Dial(ctx, cl.common, name, cl.log)
	}
	nc, err := cl.embedded.Connect(name)
	if err != nil {
		return nil, err
	}
	return service.NewConn(nc, cl.common, func(_ context.Context, purpose string) (*nats.Conn, error) {
		return cl.embedded.Connect(name + " " + purpose)
	})
}

// Shutdown stops an owned embedded server; call it after every connection
// is closed.
func (cl *Cluster) Shutdown() {
	if cl.embedded != nil {
		cl.embedded.Shutdown()
	}
}
