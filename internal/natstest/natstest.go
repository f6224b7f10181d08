package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is a running embedded nats-server owned by one test.
type Server struct {
	*server.Server
	// URL is the client URL (nats://127.0.0.1:<port>).
	URL string
	// StoreDir is the JetStream store directory.
	StoreDir string

	opts *server.Options // as started, with the port it listens on
}

// Start runs a JetStream-enabled nats-server on a random loopback port with
// its store in a fresh temporary directory, and shuts it down when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWithOptions(t, &server.Options{})
}

// StartWithOptions is [Start] with caller-supplied options; host, port,
// JetStream and store dir are filled in when unset.
func StartWithOptions(t testing.TB, opts *server.Options) *Server {
	t.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	opts.JetStream = true
	opts.NoSigs = true
	opts.NoLog = true
	s, err := server.NewServer(opts.Clone())
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("natstest: server not ready within 10s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	started := opts.Clone()
	started.Port = s.Addr().(*net.TCPAddr).Port
	return &Server{Server: s, URL: s.ClientURL(), StoreDir: opts.StoreDir, opts: started}
}

// Reconnecting are the options of a connection that outlives a
// [Server.Restart]: it reconnects forever, every 20ms.
var Reconnecting = []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond)}

// Restart shuts s down (if it is not already) and starts a new server on
// its port with its store, which it returns.
func (s *Server) Restart(t testing.TB) *Server {
	t.Helper()
	return s.RestartWith(t, func(*server.Options) {})
}

// Reload applies the options changed by change to the running server, as
// a configuration reload does (nats-server --signal reload).
func (s *Server) Reload(t testing.TB, change func(*server.Options)) {
	t.Helper()
	opts := s.opts.Clone()
	change(opts)
	if err := s.ReloadOptions(opts.Clone()); err != nil {
		t.Fatalf("natstest: reload: %v", err)
	}
	s.opts = opts
}

// RestartWith is [Server.Restart] with the options changed by change
// first (a configuration an operator changed between two starts).
func (s *Server) RestartWith(t testing.TB, change func(*server.Options)) *Server {
	t.Helper()
	s.Shutdown()
	s.WaitForShutdown()
	opts := s.opts.Clone()
	change(opts)
	return StartWithOptions(t, opts)
}

// Outage takes s down (if it is not already), runs op while it is down,
// and starts the server again after pause. It returns op's error, failing
// the test when op has not returned within limit of the restart.
func (s *Server) Outage(t testing.TB, pause, limit time.Duration, op func() error) error {
	t.Helper()
	s.Shutdown()
	s.WaitForShutdown()
	done := make(chan error, 1)
	go func() { done <- op() }()
	time.Sleep(pause)
	s.Restart(t)
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("natstest: the operation did not return within %v of the restart", limit)
		return nil
	}
}

// Conn returns a client connection closed when the test ends.
func (s *Server) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection with opts.
func (s *Server) JetStream(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := s.Conn(t, opts...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}
