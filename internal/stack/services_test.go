package stack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/hooks/remote"
)

// services starts an ingress and one worker guarded by the fail-closed
// interceptor "guard" (discovery bounded by 30s) on srv.
func services(t *testing.T, srv *natstest.Server) (*stack.Running, string) {
	guard := remote.Config{Service: "guard", Failure: remote.FailClosed, Timeout: 30 * time.Second}
	return startOn(t, srv, 1, workercmd.Options{Topology: memory, Instance: "t", Workspace: t.TempDir(), Interceptors: []remote.Config{guard}})
}

// memory is the topology of these tests.
var memory = natsx.Topology{MemoryStorage: true}

// startOn starts an ingress and workers workers of worker on srv, and
// returns them with the ingress's base URL.
func startOn(t *testing.T, srv *natstest.Server, workers int, worker workercmd.Options) (*stack.Running, string) {
	t.Helper()
	common := &cli.Common{Home: t.TempDir(), Prefix: "bub", LogLevel: "info", LogFormat: "text", NATS: natsx.ClientConfig{URL: srv.URL}}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := stack.Open(common, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	running, err := stack.StartServices(t.Context(), cl, stack.Services{
		Ingress: &ingresscmd.Options{Topology: memory, Instance: "t", Listener: ln},
		Workers: workers,
		Worker:  worker,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Stop() })
	return running, "http://" + ln.Addr().String()
}

// readyz returns GET /readyz's status and body, or the request's error.
func readyz(base string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestReadinessWaitsForEveryWorker holds the guard interceptor's discovery
// reply: while the worker cannot start, /readyz answers 503 and names it;
// once the guard answers, /readyz answers 200.
func TestReadinessWaitsForEveryWorker(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	asked := make(chan *nats.Msg, 1)
	if _, err := nc.Subscribe("$SRV.INFO.guard", func(m *nats.Msg) { asked <- m }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	running, base := services(t, srv)
	var req *nats.Msg
	select {
	case req = <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never asked for the guard interceptor")
	}
	status, body, err := readyz(base)
	if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(body, "worker 0") {
		t.Fatalf("readyz while the worker starts: %d %q %v; want 503 naming worker 0", status, body, err)
	}
	// An instance serving one hook (a fail-closed interceptor serving none
	// stops its worker from starting).
	if err := req.Respond([]byte(`{"type":"io.nats.micro.v1.info_response","name":"guard","id":"g1","version":"1.0.0","endpoints":[{"name":"before_tool_call","subject":"bub.hook.guard.before_tool_call"}]}`)); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() (bool, string) {
		status, body, err := readyz(base)
		return err == nil && status == http.StatusOK, "readyz after the worker started: " + body
	})
	if err := running.Err(); err != nil {
		t.Fatalf("Err with every service running: %v", err)
	}
}

// TestAFailedServiceStopsTheOthers starts a worker whose fail-closed
// interceptor is not running: the worker fails, Done is closed, Err and
// Ready name the failure, and the ingress's listener is closed, so a
// client is refused instead of waiting on a port nobody serves.
func TestAFailedServiceStopsTheOthers(t *testing.T) {
	srv := natstest.Start(t)
	running, base := services(t, srv)
	select {
	case <-running.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done not closed after the worker failed")
	}
	if err := running.Err(); err == nil || !strings.Contains(err.Error(), `interceptor "guard" fails closed`) {
		t.Fatalf("Err = %v, want the guard's failure", err)
	}
	if err := running.Ready(t.Context()); err == nil || !strings.Contains(err.Error(), "worker 0") {
		t.Fatalf("Ready = %v, want the failed worker named", err)
	}
	natstest.Eventually(t, 30*time.Second, func() (bool, string) {
		_, _, err := readyz(base)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("readyz hangs after the services stopped: %v", err)
		}
		return err != nil, "readyz still answers after the services stopped"
	})
	if err := running.Stop(); err == nil {
		t.Fatal("Stop returned nil after a service failed")
	}
}

// TestAClosedConnectionStopsTheStack: a service whose NATS connection is
// closed for good (here the server rejects a subject longer than its
// control line, which nats.go does not recover from) fails with
// service.ErrConnClosed and the server's reason, and the stack stops, as
// a service of its own would exit, instead of serving on without NATS.
func TestAClosedConnectionStopsTheStack(t *testing.T) {
	running, base := startOn(t, natstest.Start(t), 0, workercmd.Options{})
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		code, body, err := readyz(base)
		return code == http.StatusOK, fmt.Sprintf("readyz %d %s %v", code, body, err)
	})
	if err := running.Conns()[0].NC.Publish(strings.Repeat("a", 5000), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stack kept running on a closed connection")
	}
	if err := running.Err(); !errors.Is(err, service.ErrConnClosed) || !strings.Contains(err.Error(), "maximum control line exceeded") || !strings.Contains(err.Error(), "ingress") {
		t.Fatalf("Err = %v, want the ingress's ErrConnClosed with the server's reason", err)
	}
}

// TestReadyWithoutWorkers checks the readiness of a stack without workers
// (nothing to wait for) before and after Stop.
func TestReadyWithoutWorkers(t *testing.T) {
	srv := natstest.Start(t)
	common := &cli.Common{Home: t.TempDir(), Prefix: "bub", LogLevel: "info", LogFormat: "text", NATS: natsx.ClientConfig{URL: srv.URL}}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := stack.Open(common, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	running, err := stack.StartServices(context.Background(), cl, stack.Services{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := running.Ready(t.Context()); err != nil {
		t.Fatalf("Ready = %v with no services", err)
	}
	if err := running.Stop(); err != nil {
		t.Fatalf("Stop = %v with no services", err)
	}
}
