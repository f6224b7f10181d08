package bubcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
)

// client is a CLI command's connection to Bub's NATS.
type client struct {
	cluster *stack.Cluster
	conn    *service.Conn
	log     *slog.Logger
}

// urlFile is where `bub up` advertises its NATS URL, so other commands on
// the same machine use the running server instead of embedding a second
// one over the same store.
func urlFile(home string) string { return filepath.Join(home, "nats.url") }

// withClient connects the way the common flags say: --nats / BUB_NATS_URL;
// else the NATS server of a `bub up` running with the same home; else an
// embedded server over <home>/nats for the duration of body. It changes
// the topology only when it embeds the server (a fresh home has none):
// a client of a running cluster only binds to what exists, so a read
// never creates or rescales a stream.
func withClient(ctx context.Context, common *cli.Common, _ cli.Getenv, body func(context.Context, *client) error) error {
	return connect(ctx, common, true, body)
}

// connect is withClient; ensure says whether to provision an embedded
// server's topology before body.
func connect(ctx context.Context, common *cli.Common, ensure bool, body func(context.Context, *client) error) error {
	if err := common.Validate(); err != nil {
		return err
	}
	log := common.Logger(os.Stderr)
	if common.NATS.URL == "" {
		if u := runningURL(common.Home); u != "" {
			common.NATS.URL = u
		}
	}
	cl, err := stack.Open(common, true, "", log)
	if err != nil {
		return err
	}
	defer cl.Shutdown()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := cl.Connect(cctx, "bub-cli")
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	if ensure && cl.Embedded() {
		if err := natsx.EnsureTopologyLogged(ctx, conn.JS, conn.Names, conn.Topology, log); err != nil {
			return err
		}
	}
	return body(ctx, &client{cluster: cl, conn: conn, log: log})
}

// runningURL returns the URL a local `bub up` advertised, or "".
func runningURL(home string) string {
	b, err := os.ReadFile(urlFile(home))
	if err != nil {
		return ""
	}
	u := strings.TrimSpace(string(b))
	if u == "" || !natsx.Reachable(u, 500*time.Millisecond) {
		return ""
	}
	return u
}

// advertise writes the URL file and returns a function removing it.
func advertise(home, url string) (func(), error) {
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	path := urlFile(home)
	if err := os.WriteFile(path, []byte(url+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("removing nats url file", "err", err)
		}
	}, nil
}
