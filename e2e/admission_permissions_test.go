package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	bubstatus "github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
)

// deployConf is the server configuration of the compose deployment, with
// one user per service role.
const deployConf = "../deploy/nats/nats-server.conf"

var rolePasswords = map[string]string{
	"ingress": "pw-ingress", "worker": "pw-worker", "recorder": "pw-recorder",
	"interceptor": "pw-interceptor", "observer": "pw-observer", "admin": "pw-admin",
}

// startDeployServer runs a nats-server with the users and permissions of
// deploy/nats/nats-server.conf (loaded by the server's own config parser;
// only the listen address and the store move to the test).
func startDeployServer(t *testing.T) *natstest.Server {
	t.Helper()
	for role, pw := range rolePasswords {
		t.Setenv("BUB_NATS_"+strings.ToUpper(role)+"_PASSWORD", pw)
	}
	t.Setenv("BUB_JS_SYNC", "always") // what compose passes by default
	opts, err := server.ProcessConfigFile(deployConf)
	if err != nil {
		t.Fatalf("loading %s: %v", deployConf, err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir = "127.0.0.1", server.RANDOM_PORT, 0, t.TempDir()
	return natstest.StartWithOptions(t, opts)
}

// asRole connects as a role and collects the server's async errors.
func asRole(t *testing.T, srv *natstest.Server, role string) (*nats.Conn, func() []error) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	nc, err := nats.Connect(srv.URL, nats.UserInfo(role, rolePasswords[role]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}))
	if err != nil {
		t.Fatalf("connecting as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

func violation(errs []error, subject string) bool {
	for _, err := range errs {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
			return true
		}
	}
	return false
}

// TestObserverCannotPublishInbound: the observer role may watch events
// but the server refuses its publish to bub.inbound.>, and nothing reaches
// the inbound stream; an interceptor cannot publish lifecycle events.
func TestObserverCannotPublishInbound(t *testing.T) {
	srv := startDeployServer(t)
	names := subjects.Default()
	admin, _ := asRole(t, srv, "admin")
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.CreateOrUpdateStream(t.Context(), jetstream.StreamConfig{Name: names.InboundStream(), Subjects: []string{names.InboundAll()}}); err != nil {
		t.Fatal(err)
	}

	observer, errs := asRole(t, srv, "observer")
	if _, err := observer.SubscribeSync(names.EventsAll()); err != nil {
		t.Fatal(err)
	}
	ojs, err := jetstream.New(observer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := ojs.Publish(ctx, names.Inbound("http"), []byte(`{"content":"sneaky"}`)); err == nil {
		t.Fatal("the observer published an inbound envelope")
	}
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		return violation(errs(), names.Inbound("http")), "no permissions violation reported for the observer's publish"
	})
	if violation(errs(), names.EventsAll()) {
		t.Fatal("the observer may not subscribe to events")
	}
	st, err := ajs.Stream(t.Context(), names.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(t.Context()); err != nil || info.State.Msgs != 0 {
		t.Fatalf("inbound stream holds %d messages (%v)", info.State.Msgs, err)
	}

	interceptor, ierrs := asRole(t, srv, "interceptor")
	if err := interceptor.Publish(names.Event("s", "run.started"), []byte("forged")); err != nil {
		t.Fatal(err)
	}
	_ = interceptor.Flush()
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		return violation(ierrs(), names.Event("s", "run.started")), "no permissions violation reported for the interceptor's event"
	})
}

// TestServiceRolesDoTheirJobs runs ingress, a worker and the recorder as
// processes, each with its own user from the deployment config, through
// a plain turn and a steering message into a running turn; no service
// hits a permissions violation, each answers NATS micro discovery and its
// status endpoint, and the tape is written.
func TestServiceRolesDoTheirJobs(t *testing.T) {
	srv := startDeployServer(t)
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Match: "slow", Text: "slow done.", Delay: fakellm.Duration(slowDelay)},
	}})
	common := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x", "BUB_ADMISSION=steer"}
	as := func(role string) []string {
		return append(append([]string(nil), common...), "BUB_NATS_USER="+role, "BUB_NATS_PASSWORD="+rolePasswords[role])
	}
	httpAddr := freeAddr(t)
	procs := []*proc{start(t, "ingress", as("ingress"), "--http", httpAddr)}
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)
	procs = append(procs, start(t, "worker", as("worker"), "--workspace", t.TempDir()), start(t, "recorder", as("recorder")))

	first := map[string]any{"id": "perm-1", "content": "hello with least privilege", "session_id": "perm"}
	status, answered := post(t, web, first, "30s")
	if status != 200 || len(answered.Outbounds) != 1 {
		t.Fatalf("turn: %d %+v", status, answered)
	}
	// A retry reads the turn's done marker and its stored reply as ingress.
	if status, r := post(t, web, first, "30s"); status != 200 || len(r.Outbounds) != 1 || r.Outbounds[0].Content != answered.Outbounds[0].Content {
		t.Fatalf("retry: %d %+v, want the original reply %+v", status, r, answered)
	}
	// The web console's read API, each as ingress (the hook report is
	// answered by the worker with its own user).
	for _, path := range []string{"/v1/hooks", "/v1/status", "/v1/sessions", "/v1/sessions/perm/tape"} {
		resp, err := http.Get(web + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		var st struct {
			Workers struct {
				Instances []struct{ Instance string } `json:"instances"`
			} `json:"workers"`
		}
		if path == "/v1/status" && (json.Unmarshal(body, &st) != nil || len(st.Workers.Instances) != 1) {
			t.Errorf("GET /v1/status lists the workers %+v, want the one running (NATS micro discovery as ingress): %s", st.Workers.Instances, body)
		}
	}
	// Each service is a NATS micro service answering under its own user:
	// STATS, and its status endpoint with the service's own figure.
	admin, _ := asRole(t, srv, "admin")
	for svc, figure := range map[string]string{"ingress": `"http"`, "worker": `"concurrency"`, "recorder": `"lag"`} {
		raw, err := remote.Discover(t.Context(), admin, micro.StatsVerb, "bub-"+svc, 5*time.Second, 300*time.Millisecond)
		if err != nil || len(raw) != 1 {
			t.Errorf("$SRV.STATS.bub-%s: %v, %d replies, want 1", svc, err, len(raw))
			continue
		}
		var stats micro.Stats
		if err := json.Unmarshal(raw[0], &stats); err != nil {
			t.Fatal(err)
		}
		msg, err := admin.Request(subjects.Default().ServiceStatus(svc, stats.Metadata[bubstatus.MetadataInstance]), nil, 5*time.Second)
		if err != nil || !strings.Contains(string(msg.Data), figure) {
			t.Errorf("status of bub-%s: %v, want its %s", svc, err, figure)
		}
	}
	done := postAsync(t, web, "perm", "slow question")
	eventually(t, 30*time.Second, func() (bool, string) { return len(fake.Requests()) == 2, "slow turn not running" })
	if status, r := post(t, web, map[string]any{"content": "steer: mention the kiwi", "session_id": "perm"}, ""); status != 202 {
		t.Fatalf("steer: %d %+v", status, r)
	}
	if r := <-done; len(r.Outbounds) != 1 {
		t.Fatalf("slow turn: %+v", r)
	}
	if reqs := fake.Requests(); len(reqs) != 3 || !hasMessage(reqs[2], "mention the kiwi") {
		t.Fatalf("the steering message did not reach the running turn (%d requests)", len(reqs))
	}
	adminEnv := []string{"BUB_NATS_USER=admin", "BUB_NATS_PASSWORD=" + rolePasswords["admin"]}
	eventually(t, 30*time.Second, func() (bool, string) {
		out := run(t, "bub", adminEnv, "tape", "show", "--nats", srv.URL, "perm")
		return strings.Contains(out, "mention the kiwi") && strings.Contains(out, "least privilege"), out
	})
	for _, p := range procs {
		if out := p.Output(); strings.Contains(strings.ToLower(out), "permissions violation") {
			t.Errorf("%s hit a permissions violation:\n%s", p.Name, out)
		}
	}
}
