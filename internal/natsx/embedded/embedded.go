package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natsx"
)

// Config configures the embedded nats-server of `bub` when no NATS URL is
// given.
type Config struct {
	// StoreDir holds JetStream data (under the bub home directory).
	StoreDir string
	// Listen is host:port for client connections; "" listens nowhere
	// (in-process connections only).
	Listen string
	// ConfigFile is an optional nats-server configuration file.
	ConfigFile string
	// SyncAlways makes JetStream fsync every write; else SyncInterval,
	// when set, is how often it fsyncs (the server's default is 2m). See
	// natsx.ParseSync (BUB_JS_SYNC).
	SyncAlways   bool
	SyncInterval time.Duration
}

// Server is a running in-process nats-server with JetStream.
type Server struct {
	srv *server.Server
}

// Start starts a JetStream server storing data in cfg.StoreDir.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded nats: store dir is required")
	}
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		o, err := server.ProcessConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("reading nats config %s: %w", cfg.ConfigFile, err)
		}
		opts = o
	}
	opts.ServerName = "bub-embedded"
	opts.JetStream = true
	opts.StoreDir = cfg.StoreDir
	opts.NoSigs = true
	opts.NoLog = true
	if opts.MaxPayload == 0 {
		opts.MaxPayload = natsx.MaxPayload
	}
	if cfg.SyncInterval > 0 {
		opts.SyncInterval = cfg.SyncInterval
	}
	if cfg.SyncAlways {
		opts.SyncAlways = true
		opts.SyncInterval = 2 * time.Minute // what nats-server sets for sync_interval: always
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("creating embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded nats: not ready within 15s")
	}
	return &Server{srv: srv}, nil
}

// ClientURL returns the URL clients dial, or "" without a listener.
func (e *Server) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// ConnectOption returns the option that makes nats.Connect use an
// in-process connection to this server (no TCP).
func (e *Server) ConnectOption() nats.Option { return nats.InProcessServer(e.srv) }

// Connect opens an in-process client connection.
func (e *Server) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), e.ConnectOption()}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting in-process to embedded nats: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it is down. It is the last
// step of a drain: stop intake, finish turns, flush, drain connections,
// then the server.
func (e *Server) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
