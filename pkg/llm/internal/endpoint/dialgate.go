package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
)

// maxHandshakes is how many TLS handshakes with one provider host run at
// once while the host may speak HTTP/2.
const maxHandshakes = 2

// gatedTransport bounds the TLS connections a burst of model calls opens
// to a provider that speaks HTTP/2.
//
// net/http dials a connection for every request that finds no connection
// with a free stream, and hands a new HTTP/2 connection to all the
// requests waiting at that moment, of which only the server's stream
// limit (often 100 or 250) can use it. A burst of 1,000 calls to an
// HTTP/2 provider thus starts hundreds of TLS handshakes at once, each
// costing both ends CPU and memory, and leaves as many connections open.
// Here at most [maxHandshakes] handshakes with a host run at once, and a
// dial waiting for its turn gives up as soon as its request got a
// connection (the one another dial opened) or ended, and fails with the
// error of a dial that failed meanwhile (a host that does not answer
// fails its waiting calls after one dial timeout, not one after another).
// A host that answered a handshake with HTTP/1.1, where every call needs
// its own connection, is not bounded after that first answer.
//
// Only direct connections go through the gate: [clientFor] installs it
// when no HTTPS proxy is configured (a proxy's connection is dialled
// through DialTLSContext too, and has its own protocol).
type gatedTransport struct {
	*http.Transport
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	tls   *tls.Config // the transport's, with HTTP/2 offered
	mu    sync.Mutex
	hosts map[string]*hostGate
}

// hostGate is the gate of one host (host:port).
type hostGate struct {
	slots chan struct{}
	h1    chan struct{} // closed once a handshake negotiated HTTP/1.1: no bound
	once  sync.Once

	mu   sync.Mutex
	next *dialFailure // what the dials waiting now learn of the next failure
}

// dialFailure is a failed dial of a host, told to every dial that waited
// at its gate meanwhile: done is closed once err is set.
type dialFailure struct {
	done chan struct{}
	err  error
}

// failure returns what a dial starting to wait learns of the next failed
// dial.
func (h *hostGate) failure() *dialFailure {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next
}

// failed tells err to every dial waiting at the gate, as x/net/http2's
// shared dial does: while a host does not answer, its waiting calls fail
// with the first dial that did, not one dial timeout after another.
func (h *hostGate) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next.err = err
	close(h.next.done)
	h.next = &dialFailure{done: make(chan struct{})}
}

// errConnNotNeeded ends a dial whose request got a connection, or ended,
// while the dial waited; net/http discards it, as nothing waits for it.
var errConnNotNeeded = errors.New("endpoint: no request waits for this connection")

// gate returns t with the dial gate when no HTTPS proxy is configured in
// the environment, else t unchanged.
func gate(t *http.Transport) http.RoundTripper {
	if os.Getenv("HTTPS_PROXY") != "" || os.Getenv("https_proxy") != "" {
		return t
	}
	g := &gatedTransport{Transport: t, hosts: map[string]*hostGate{}, dial: t.DialContext}
	if g.dial == nil {
		g.dial = (&net.Dialer{}).DialContext
	}
	g.tls = &tls.Config{}
	if t.TLSClientConfig != nil {
		g.tls = t.TLSClientConfig.Clone()
	}
	if len(g.tls.NextProtos) == 0 {
		g.tls.NextProtos = []string{"h2", "http/1.1"}
	}
	t.DialTLSContext = g.dialTLS
	return g
}

// waiter is what a request's dials know of it: whether its current
// attempt to get a connection still waits for one. net/http makes a new
// attempt when a request must be retried on another connection (one the
// server closed or sent away): that attempt's dial must not give up
// because an earlier attempt got a connection. A request that ended
// (answered, cancelled, timed out) waits for nothing, so the dials it
// left waiting at a host's gate give up instead of holding their turn
// there: during a provider outage, a dial per abandoned call would
// otherwise wait its turn, then its dial timeout, two at a time.
type waiter struct {
	mu   sync.Mutex
	wait chan struct{} // closed once the current attempt no longer waits
}

type waiterKey struct{}

// attempt starts the request's next attempt; the dials of the last one
// are no longer waited for.
func (w *waiter) attempt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeLocked()
	w.wait = make(chan struct{})
}

// stop records that the current attempt no longer waits for a
// connection: it got one, or the request ended.
func (w *waiter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeLocked()
}

// closeLocked closes w.wait unless it is closed; w.mu is held.
func (w *waiter) closeLocked() {
	select {
	case <-w.wait:
	default:
		close(w.wait)
	}
}

// waiting returns the channel closed once the current attempt no longer
// waits for a connection.
func (w *waiter) waiting() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wait
}

// RoundTrip marks the request so that its dials see when its current
// attempt no longer waits for a connection (net/http dials with a context
// that keeps the request's values, and calls GetConn at the start of
// every attempt).
func (g *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return g.Transport.RoundTrip(req)
	}
	w := &waiter{wait: make(chan struct{})}
	defer w.stop()
	ctx := context.WithValue(req.Context(), waiterKey{}, w)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { w.attempt() },
		GotConn: func(httptrace.GotConnInfo) { w.stop() },
	})
	return g.Transport.RoundTrip(req.WithContext(ctx))
}

// host returns the gate of addr.
func (g *gatedTransport) host(addr string) *hostGate {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.hosts[addr]
	if h == nil {
		h = &hostGate{slots: make(chan struct{}, maxHandshakes), h1: make(chan struct{}), next: &dialFailure{done: make(chan struct{})}}
		g.hosts[addr] = h
	}
	return h
}

// dialTLS is the transport's DialTLSContext: the TCP dial and the TLS
// handshake, through the host's gate unless the host speaks HTTP/1.1.
// A dial that fails tells the dials waiting at the gate.
func (g *gatedTransport) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	h := g.host(addr)
	var waited <-chan struct{}
	if w, ok := ctx.Value(waiterKey{}).(*waiter); ok {
		waited = w.waiting()
	}
	failure := h.failure()
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-h.h1:
		return g.handshake(ctx, h, network, addr)
	case <-waited:
		return nil, errConnNotNeeded
	case <-failure.done:
		return nil, failure.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-waited:
		return nil, errConnNotNeeded
	default:
	}
	conn, err := g.handshake(ctx, h, network, addr)
	if err != nil && ctx.Err() == nil {
		h.failed(err)
	}
	return conn, err
}

// handshake dials addr and shakes hands (bounded by the transport's
// TLSHandshakeTimeout); it opens the gate of h for good when the host
// answers with HTTP/1.1.
func (g *gatedTransport) handshake(ctx context.Context, h *hostGate, network, addr string) (net.Conn, error) {
	conn, err := g.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := g.tls
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			conn.Close()
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	hctx := ctx
	if d := g.TLSHandshakeTimeout; d > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		h.once.Do(func() { close(h.h1) })
	}
	return tc, nil
}
