package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// burstServer is a TLS server that holds every request until want of
// them are in flight at once, counting its connections and the
// handshakes that are past their ClientHello at the same time (each
// takes at least 20 ms there, so concurrent dials overlap).
type burstServer struct {
	*httptest.Server
	conns         atomic.Int64
	handshakes    atomic.Int64
	maxHandshakes atomic.Int64
	arrived       atomic.Int64
	release       chan struct{}
}

func newBurstServer(t *testing.T, h2 bool, streams uint32, want int64) *burstServer {
	s := &burstServer{release: make(chan struct{})}
	var once sync.Once
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.arrived.Add(1) == want {
			once.Do(func() { close(s.release) })
		}
		select {
		case <-s.release:
		case <-time.After(20 * time.Second):
			http.Error(w, "the burst never was in flight at once", http.StatusGatewayTimeout)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	s.EnableHTTP2 = h2
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the test's end cuts off
	s.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(streams)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		n := s.handshakes.Add(1)
		defer s.handshakes.Add(-1)
		for m := s.maxHandshakes.Load(); n > m && !s.maxHandshakes.CompareAndSwap(m, n); m = s.maxHandshakes.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return nil, nil
	}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// noProxy clears the HTTPS proxy of the environment, under which the
// default client dials through the gate.
func noProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "")
	t.Setenv("https_proxy", "")
}

// transport returns a clone of net/http's default transport that trusts
// s.
func (s *burstServer) transport() *http.Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return base
}

// burst sends n requests at once through the default client built over
// a transport that trusts s, and checks that each was answered over HTTP
// major.
func (s *burstServer) burst(t *testing.T, n, major int) {
	noProxy(t)
	c := clientFor(s.transport())
	t.Cleanup(c.CloseIdleConnections)
	if _, ok := c.Transport.(*gatedTransport); !ok {
		t.Fatalf("the default client's transport is %T, want the gated one", c.Transport)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := c.Get(s.URL)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != major {
				t.Errorf("request %d: %s over HTTP/%d, want 200 over HTTP/%d", i, resp.Status, resp.ProtoMajor, major)
			}
		})
	}
	wg.Wait()
}

// TestBurstOverHTTP2OpensFewConnections: 300 calls at once to an HTTP/2
// host allowing 100 streams per connection are all in flight together,
// with never more than 2 handshakes at once, over a handful of
// connections: 3 are needed; a dial that takes its turn just before the
// requests it would serve took their streams on the connection opened
// before it adds one more (6 to 8 measured here). net/http's transport
// alone opened 320 to 451 connections for the same burst, up to 300
// handshakes at once.
func TestBurstOverHTTP2OpensFewConnections(t *testing.T) {
	const n = 300
	s := newBurstServer(t, true, 100, n)
	s.burst(t, n, 2)
	if got := s.conns.Load(); got < 3 || got > 15 {
		t.Errorf("%d connections for %d concurrent calls at 100 streams each, want 3 to 15", got, n)
	}
	if got := s.maxHandshakes.Load(); got > maxHandshakes {
		t.Errorf("%d handshakes at once, want at most %d", got, maxHandshakes)
	}
	t.Logf("%d connections, at most %d handshakes at once", s.conns.Load(), s.maxHandshakes.Load())
}

// TestBurstOverHTTP1IsNotBounded: a TLS host that negotiates HTTP/1.1
// needs a connection per call; once its first handshake said so, the
// dials of a burst run at once (more than the gate's bound), and every
// call of the burst is in flight together on its own connection.
func TestBurstOverHTTP1IsNotBounded(t *testing.T) {
	const n = 40
	s := newBurstServer(t, false, 0, n)
	s.burst(t, n, 1)
	if got := s.conns.Load(); got != n {
		t.Errorf("%d connections for %d concurrent HTTP/1.1 calls, want one each", got, n)
	}
	if got := s.maxHandshakes.Load(); got <= maxHandshakes {
		t.Errorf("at most %d handshakes at once with an HTTP/1.1 host, want more than the gate's %d", got, maxHandshakes)
	}
}

// TestGateStaysOffWithAProxy: with an HTTPS proxy configured the client
// dials as net/http does (the proxy's connection has its own protocol).
func TestGateStaysOffWithAProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
	c := clientFor(http.DefaultTransport)
	if tr, ok := c.Transport.(*http.Transport); !ok || tr.DialTLSContext != nil {
		t.Fatalf("transport %T with an HTTPS proxy, want net/http's own dialling", c.Transport)
	}
}

// TestRetriedAttemptDials: a dial of an attempt that got a connection
// gives up, and the request's next attempt (net/http retries a request
// whose connection the server closed or sent away) dials again.
func TestRetriedAttemptDials(t *testing.T) {
	s := newBurstServer(t, true, 100, 1)
	noProxy(t)
	g, ok := gate(s.transport()).(*gatedTransport)
	if !ok {
		t.Fatal("no gate")
	}
	addr := s.Listener.Addr().String()
	w := &waiter{wait: make(chan struct{})}
	ctx := context.WithValue(context.Background(), waiterKey{}, w)
	w.attempt()
	w.stop()
	if _, err := g.dialTLS(ctx, "tcp", addr); !errors.Is(err, errConnNotNeeded) {
		t.Fatalf("a dial of an attempt that got a connection: %v, want %v", err, errConnNotNeeded)
	}
	w.attempt()
	conn, err := g.dialTLS(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("the retried attempt's dial: %v", err)
	}
	conn.Close()
	if got := s.conns.Load(); got != 1 {
		t.Errorf("%d connections, want the retried attempt's one", got)
	}
}

// TestEndedRequestsDialGivesUp: a dial at a host's gate (both handshake
// slots taken) gives up once its request ended (RoundTrip returned),
// whether that happened before or while it waits, instead of waiting for
// its turn and then dialling for nobody.
func TestEndedRequestsDialGivesUp(t *testing.T) {
	noProxy(t)
	g, ok := gate(http.DefaultTransport.(*http.Transport).Clone()).(*gatedTransport)
	if !ok {
		t.Fatal("no gate")
	}
	const addr = "127.0.0.1:1" // never dialled: the slots stay taken
	h := g.host(addr)
	for range maxHandshakes {
		h.slots <- struct{}{}
	}
	w := &waiter{wait: make(chan struct{})}
	w.attempt()
	done := make(chan error, 1)
	go func() {
		_, err := g.dialTLS(context.WithValue(context.Background(), waiterKey{}, w), "tcp", addr)
		done <- err
	}()
	w.stop() // RoundTrip returned: the request ended
	if err := <-done; !errors.Is(err, errConnNotNeeded) {
		t.Fatalf("the dial of an ended request: %v, want %v", err, errConnNotNeeded)
	}
}

// TestSilentHostFailsItsWaitingCalls: against a host that accepts
// connections and never answers a handshake, the calls waiting at its
// gate fail with the first dial that timed out, as x/net/http2's shared
// dial makes them, instead of each waiting for its own turn to time out
// (30 calls, 2 at a time: 15 handshake timeouts one after the other).
func TestSilentHostFailsItsWaitingCalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			held = append(held, c) // open and silent
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	noProxy(t)
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSHandshakeTimeout = 300 * time.Millisecond
	c := clientFor(base)
	const n = 30
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range n {
		wg.Go(func() {
			if resp, err := c.Get("https://" + ln.Addr().String() + "/"); err != nil {
				failed.Add(1)
			} else {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if failed.Load() != n {
		t.Fatalf("%d of %d calls to a silent host failed, want all", failed.Load(), n)
	}
	if got := accepted.Load(); got > 2*maxHandshakes {
		t.Errorf("%d connections to a silent host for %d waiting calls, want at most %d (the dials that failed for all of them)", got, n, 2*maxHandshakes)
	}
}
