package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClientConfig says how to reach NATS. The zero value connects nowhere:
// callers either set URL or use an embedded server's connection.
type ClientConfig struct {
	// URL is a comma-separated list of server URLs.
	URL string
	// Name is the connection name shown by the server (service/instance).
	Name string
	// CredsFile is a NATS .creds file (JWT + nkey seed).
	CredsFile string
	// NKeyFile is an nkey seed file.
	NKeyFile string
	// User and Password authenticate with user/password.
	User, Password string
	// Token authenticates with a token.
	Token string
	// TLSCert, TLSKey enable client TLS certificates; TLSCA trusts a CA.
	TLSCert, TLSKey, TLSCA string
}

// Redacted returns a copy with secrets replaced, for logging.
func (c ClientConfig) Redacted() ClientConfig {
	if c.Password != "" {
		c.Password = "REDACTED"
	}
	if c.Token != "" {
		c.Token = "REDACTED"
	}
	return c
}

// LogValue implements slog.LogValuer without secrets.
func (c ClientConfig) LogValue() slog.Value {
	r := c.Redacted()
	return slog.GroupValue(
		slog.String("url", r.URL),
		slog.String("name", r.Name),
		slog.Bool("creds", r.CredsFile != ""),
		slog.Bool("nkey", r.NKeyFile != ""),
		slog.Bool("user", r.User != ""),
		slog.Bool("token", c.Token != ""),
		slog.Bool("tls", r.TLSCert != "" || r.TLSCA != ""),
	)
}

// Validate reports inconsistent settings.
func (c ClientConfig) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("nats url is required"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("tls cert and key must be given together"))
	}
	if c.User != "" && c.Token != "" {
		errs = append(errs, errors.New("choose either user/password or token"))
	}
	return errors.Join(errs...)
}

// Reconnect backoff: after every server of the list failed once, the
// client waits ReconnectFirst, doubling each round up to ReconnectMax,
// plus a random jitter of up to a quarter of that, so the clients of a
// lost server do not all come back at the same instant.
const (
	ReconnectFirst = 250 * time.Millisecond
	ReconnectMax   = 5 * time.Second
)

// A connection sends a PING every PingInterval and gives up on its
// server after MaxPingsOut of them went unanswered, then reconnects to
// another: a server cut off by a partition (its packets dropped, no
// reset) is left within about (MaxPingsOut+1) × PingInterval, 6 s,
// instead of nats.go's default of minutes (2-minute pings).
const (
	PingInterval = 2 * time.Second
	MaxPingsOut  = 2
)

// MaxPayload is the max_payload of the servers Bub ships (the embedded
// one unless its configuration file sets max_payload, and deploy/nats):
// 8 MiB, the most the NATS documentation recommends, instead of
// nats-server's 1 MiB, which one step's chat.finished event (the user's
// message, the tool results and the reply) outgrows with a file or a page
// in a tool result. `bub status` warns about a server that takes less.
const MaxPayload = 8 << 20

// lameDuckJitter bounds the random wait before a connection to a server
// in lame-duck mode moves to another one.
const lameDuckJitter = time.Second

// ReconnectDelay is the wait before reconnect round attempts (1, 2, …):
// [ReconnectFirst] doubled per round up to [ReconnectMax], plus up to 25%
// jitter.
func ReconnectDelay(attempts int) time.Duration {
	d := ReconnectMax
	if attempts < 16 {
		d = min(ReconnectFirst<<max(attempts-1, 0), ReconnectMax)
	}
	return d + rand.N(d/4+1)
}

// Options returns the nats.Options of c: credentials, TLS, and reconnect
// forever with backoff and jitter ([ReconnectDelay]), with the connection
// events logged and a dead server noticed within seconds
// ([PingInterval]). A server entering lame-duck mode (shutting down soon)
// makes the connection move to another server of the cluster at once.
func (c ClientConfig) Options(log *slog.Logger) ([]nats.Option, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(ReconnectDelay),
		nats.RetryOnFailedConnect(true),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
		nats.LameDuckModeHandler(func(nc *nats.Conn) {
			log.Info("nats.lame_duck", "url", nc.ConnectedUrlRedacted())
			// The server no longer accepts clients: reconnecting now lands
			// on another one. The jitter spreads the clients out.
			time.AfterFunc(rand.N(lameDuckJitter), func() { _ = nc.ForceReconnect() })
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats.disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats.reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("nats.async_error", "subject", subj, "err", err)
		}),
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading nkey seed: %w", err)
		}
		opts = append(opts, o)
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	return opts, nil
}

// Connect dials NATS and waits until connected or ctx ends.
func Connect(ctx context.Context, c ClientConfig, log *slog.Logger) (*nats.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts, err := c.Options(log)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	if err := waitConnected(ctx, nc); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

func waitConnected(ctx context.Context, nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for nats connection to %s: %w", nc.Opts.Servers, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Reachable reports whether a NATS server answers at url within timeout.
func Reachable(url string, timeout time.Duration) bool {
	nc, err := nats.Connect(url, nats.Timeout(timeout), nats.MaxReconnects(0))
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

// JetStream returns the JetStream context of nc in domain (empty = the
// domain of the server nc is connected to): every JetStream API request,
// KV put and direct get of a leaf-node deployment goes to the hub's
// domain this way (BUB_JS_DOMAIN).
func JetStream(nc *nats.Conn, domain string) (jetstream.JetStream, error) {
	if domain == "" {
		return jetstream.New(nc)
	}
	return jetstream.NewWithDomain(nc, domain)
}
