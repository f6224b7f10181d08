package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	micro  *announcement                                                 // set by Announce
	redial func(ctx context.Context, purpose string) (*nats.Conn, error) // see Redial
}

// ErrNoURL is returned when a service has no NATS URL: a service never
// embeds a server.
var ErrNoURL = errors.New("no NATS URL: set --nats or BUB_NATS_URL")

// ErrConnClosed is the error of a service whose NATS connection was
// closed for good while it ran (see [Run]).
var ErrConnClosed = errors.New("NATS connection closed")

// RunUntilClosed runs run with a context that also ends when c's
// connection is closed for good while it runs (the server rejected what
// it sent with an error nats.go does not recover from), and returns run's
// error joined to ErrConnClosed and the server's reason then: the service
// stops and says why instead of serving on without NATS. [Conn.Close]
// replaces the handler before it drains, so a service's own stop is not
// taken for such an end.
func (c *Conn) RunUntilClosed(ctx context.Context, run func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.NC.SetClosedHandler(func(nc *nats.Conn) {
		cancel(fmt.Errorf("%w: %v", ErrConnClosed, nc.LastError()))
	})
	err := run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrConnClosed) {
		return errors.Join(cause, err)
	}
	return err
}

// Dial connects to the cluster of common's NATS settings with the
// connection name name.
func Dial(ctx context.Context, common *cli.Common, name string, log *slog.Logger) (*Conn, error) {
	if common.NATS.URL == "" {
		return nil, ErrNoURL
	}
	cfg := common.NATS
	cfg.Name = name
	nc, err := natsx.Connect(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	return NewConn(nc, common, func(ctx context.Context, purpose string) (*nats.Conn, error) {
		cfg := cfg // each call names its own connection
		cfg.Name = name + " " + purpose
		return natsx.Connect(ctx, cfg, log)
	})
}

// Redial opens another connection to c's cluster with c's settings (an
// in-process one for an embedded server), named after c and purpose. It
// is for traffic that must not queue behind c's: the server handles each
// connection's messages in order, so a core-NATS publish waits on the
// same connection for every JetStream write ahead of it. The caller
// closes it.
func (c *Conn) Redial(ctx context.Context, purpose string) (*nats.Conn, error) {
	return c.redial(ctx, purpose)
}

// NewConn returns the Conn of nc (a dialled or an in-process connection)
// with common's names and topology, its JetStream in common's JetStream
// domain; redial opens another connection with nc's settings
// ([Conn.Redial]). On error it closes nc.
func NewConn(nc *nats.Conn, common *cli.Common, redial func(ctx context.Context, purpose string) (*nats.Conn, error)) (*Conn, error) {
	js, err := natsx.JetStream(nc, common.JSDomain)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Conn{NC: nc, JS: js, Names: common.Names(), Topology: common.Topology, redial: redial}, nil
}

// TopologyOr returns t, or the connection's topology when t is zero.
func (c *Conn) TopologyOr(t natsx.Topology) natsx.Topology {
	if t == (natsx.Topology{}) {
		return c.Topology
	}
	return t
}

// Close stops c's micro service ([Conn.Announce]), then drains c:
// pending publishes are flushed and subscriptions end.
func (c *Conn) Close() {
	c.stopAnnouncement()
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
