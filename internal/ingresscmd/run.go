package ingresscmd

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/events"
)

// Options configures [Run].
type Options struct {
	HTTP     ingress.Config
	Topology natsx.Topology
	Instance string
	// Listener, when set, is served instead of listening on HTTP.Addr.
	Listener net.Listener
	// Ready, when set, is a further readiness check of GET /readyz (the
	// services running beside the ingress, see stack.Running.Ready).
	Ready ingress.Ready
}

var errNotConnected = errors.New("not connected to NATS")

// Run serves the ingress HTTP API on conn until ctx ends.
func Run(ctx context.Context, conn *service.Conn, o Options, log *slog.Logger) error {
	if err := natsx.EnsureTopologyLogged(ctx, conn.JS, conn.Names, conn.TopologyOr(o.Topology), log); err != nil {
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
	addr := o.HTTP.Addr
	if o.Listener != nil {
		addr = o.Listener.Addr().String()
	}
	conn.ReportStatus(func() any { return map[string]string{"http": addr} })
	srv, err := ingress.NewServer(o.HTTP, gw, ready, log)
	if err != nil {
		return err
	}
	store, err := approvals.Open(ctx, conn.JS, conn.Names)
	if err != nil {
		return err
	}
	stop, err := ingress.ServeApprovalAnswers(conn.NC, conn.Names, store, dlq.NewWriter(conn.JS, conn.Names, log), log)
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	return srv.WithApprovals(store).Run(ctx, o.Listener)
}
