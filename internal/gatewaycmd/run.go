package gatewaycmd

import (
	"context"
	"log/slog"
	"time"

	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/events"
)

// Options configures [Run].
type Options struct {
	Topology natsx.Topology
	Instance string
	// Enabled is the comma list of enabled channels (see channels.Select).
	Enabled string
	// Channels provides the channels (the startup registry's
	// provide_channels).
	Channels gateway.Provider
	// Buffer configures debounce.
	Buffer channels.BufferConfig
	// ShutdownGrace bounds the sends in flight at shutdown (10s).
	ShutdownGrace time.Duration
}

// Run runs the gateway on conn until ctx ends, then drains it.
func Run(ctx context.Context, conn *service.Conn, o Options, log *slog.Logger) error {
	topo := conn.TopologyOr(o.Topology)
	if err := natsx.EnsureTopologyLogged(ctx, conn.JS, conn.Names, topo, log); err != nil {
		return err
	}
	conn.ReportStatus(func() any { return map[string]string{"channels": o.Enabled} })
	return gateway.Run(ctx, gateway.Options{
		NC: conn.NC, JS: conn.JS, Names: conn.Names, Topology: topo,
		Source:        events.Source("gateway", o.Instance),
		Enabled:       o.Enabled,
		Channels:      o.Channels,
		Buffer:        o.Buffer,
		ShutdownGrace: o.ShutdownGrace,
		Log:           log,
	})
}
