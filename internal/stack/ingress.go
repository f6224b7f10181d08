package stack

import (
	"context"
	"log/slog"
	"net"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/events"
)

// IngressOptions configures [RunIngress].
type IngressOptions struct {
	HTTP     ingress.Config
	Topology natsx.Topology
	Instance string
	// Listener, when set, is served instead of listening on HTTP.Addr.
	Listener net.Listener
	// Ready, when set, is a further readiness check of GET /readyz (the
	// services running beside the ingress, see [Running.Ready]).
	Ready ingress.Ready
}

// RunIngress serves the ingress HTTP API on conn until ctx ends.
func RunIngress(ctx context.Context, conn *Conn, o IngressOptions, log *slog.Logger) error {
	if err := natsx.EnsureTopology(ctx, conn.JS, conn.Names, conn.topology(o.Topology)); err != nil {
		return err
	}
	gw, err := ingress.NewGateway(conn.NC, conn.JS, conn.Names, events.Source("ingress", o.Instance), log)
	if err != nil {
		return err
	}
	defer gw.Close()
	ready := func(ctx context.Context) error {
		if !conn.NC.IsConnected() {
			return errNotConnected
		}
		if _, err := conn.JS.Stream(ctx, conn.Names.InboundStream()); err != nil {
			return err
		}
		if o.Ready != nil {
			return o.Ready(ctx)
		}
		return nil
	}
	srv, err := ingress.NewServer(o.HTTP, gw, ready, log)
	if err != nil {
		return err
	}
	return srv.Run(ctx, o.Listener)
}
