package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/workercmd"
	bubevents "github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

var roles = []string{"ingress", "worker", "recorder", "interceptor", "observer", "admin"}

// startServer runs nats-server with nats/nats-server.conf (listening on a
// random port, JetStream in a temporary directory, no monitoring port)
// and returns it with each role's password.
func startServer(t *testing.T) (*natstest.Server, map[string]string) {
	t.Helper()
	return startServerWith(t, "nats/nats-server.conf")
}

// startServerWith is startServer with another configuration file.
func startServerWith(t *testing.T, conf string) (*natstest.Server, map[string]string) {
	t.Helper()
	pw := map[string]string{}
	for _, r := range roles {
		pw[r] = "pw-" + r
		t.Setenv("BUB_NATS_"+strings.ToUpper(r)+"_PASSWORD", pw[r])
	}
	t.Setenv("BUB_JS_SYNC", "always") // what compose passes by default
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.HTTPPort, opts.Port, opts.StoreDir = 0, 0, ""
	return natstest.StartWithOptions(t, opts), pw
}

// asyncErrors collects the asynchronous NATS errors (permission
// violations) natsx logs as nats.async_error.
type asyncErrors struct {
	mu   sync.Mutex
	errs []string
}

func (a *asyncErrors) Enabled(context.Context, slog.Level) bool { return true }
func (a *asyncErrors) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *asyncErrors) WithGroup(string) slog.Handler            { return a }
func (a *asyncErrors) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "nats.async_error" {
		return nil
	}
	var b strings.Builder
	r.Attrs(func(at slog.Attr) bool { fmt.Fprintf(&b, "%s=%v ", at.Key, at.Value); return true })
	a.mu.Lock()
	a.errs = append(a.errs, b.String())
	a.mu.Unlock()
	return nil
}

func (a *asyncErrors) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.errs...)
}

// connect opens a service connection as role, the way the services do
// (natsx, with user and password).
func connect(t *testing.T, srv *natstest.Server, role, password string, log *slog.Logger) *service.Conn {
	t.Helper()
	common := &cli.Common{Home: t.TempDir(), Prefix: "bub", LogLevel: "info", LogFormat: "text",
		NATS: natsx.ClientConfig{URL: srv.URL, User: role, Password: password}}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := stack.Open(common, false, "", log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := cl.Connect(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.NC.Close)
	return conn
}

func decisionData(m *jetstream.RawStreamMsg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

// policy denies the bash tool and has no opinion on anything else.
type policy struct{}

func (policy) Name() string { return "policy" }
func (policy) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if in.Call.Tool == "bash" {
		return tools.Deny("no shell here"), nil
	}
	return nil, nil
}

// TestServicesRunUnderTheirNATSUsers runs the recorder, a worker (with the
// policy interceptor, fail-closed), the interceptor service and ingress,
// each connected as its own user of nats/nats-server.conf, through a turn
// with an LLM call, a tool call and a denied tool call, and checks that no
// service met a permission violation and that the turn was recorded. It
// then checks what the roles must not do.
func TestServicesRunUnderTheirNATSUsers(t *testing.T) {
	srv, pw := startServer(t)
	errs := &asyncErrors{}
	log := slog.New(errs)
	names := subjects.Default()

	svcConn := connect(t, srv, "interceptor", pw["interceptor"], log)
	svc, err := interceptor.Serve(t.Context(), svcConn.NC, names, policy{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

	_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{{Name: "tape_info"}, {Name: "bash", Arguments: json.RawMessage(`{"cmd": "true"}`)}}},
		{Text: "done"},
	}})
	models, err := llm.ConfigFromEnv(func(k string) string {
		return map[string]string{"BUB_MODEL": "openai:fake", "BUB_API_BASE": base, "BUB_API_KEY": "x"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	failures := make(chan error, 3)
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				failures <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	rec, wrk, ing := connect(t, srv, "recorder", pw["recorder"], log), connect(t, srv, "worker", pw["worker"], log), connect(t, srv, "ingress", pw["ingress"], log)
	t.Cleanup(func() { cancel(); wg.Wait() })
	run("recorder", func(ctx context.Context) error {
		return recordercmd.Run(ctx, rec, recordercmd.Options{Instance: "r"}, nil)
	})
	run("worker", func(ctx context.Context) error {
		return workercmd.Run(ctx, wrk, workercmd.Options{Instance: "w", Models: models, Workspace: t.TempDir(),
			Interceptors: []remote.Config{{Service: "policy", Failure: remote.FailClosed, Hooks: []hooks.Hook{hooks.HookBeforeToolCall}}}}, nil)
	})
	run("ingress", func(ctx context.Context) error {
		return ingresscmd.Run(ctx, ing, ingresscmd.Options{Instance: "i", Listener: ln}, nil)
	})

	url := "http://" + ln.Addr().String()
	natstest.Eventually(t, 20*time.Second, func() (bool, string) {
		select {
		case err := <-failures:
			t.Fatal(err)
		default:
		}
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	body, _ := json.Marshal(map[string]string{"content": "use the tools", "session_id": "perm:1"})
	resp, err := http.Post(url+"/v1/messages?wait=30s", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Outbounds []struct{ Content string } `json:"outbounds"`
	}
	err = json.NewDecoder(resp.Body).Decode(&reply)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(reply.Outbounds) != 1 || reply.Outbounds[0].Content != "done" {
		t.Fatalf("POST: %d %+v %v", resp.StatusCode, reply, err)
	}
	admin := connect(t, srv, "admin", pw["admin"], log)
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if err := stack.WaitRecorded(wctx, admin); err != nil {
		t.Fatal(err)
	}
	// The policy interceptor (reached over NATS as its own user) denied
	// the bash call: the worker published that decision.
	events, err := admin.JS.Stream(t.Context(), names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	decision, err := events.GetLastMsgForSubject(t.Context(), names.Event("perm:1", bubevents.SubjectName(bubevents.TypeHookDecision)))
	if err != nil || !strings.Contains(string(decision.Data), `"plugin":"policy"`) || !strings.Contains(string(decision.Data), "no shell here") {
		t.Fatalf("no deny decision of the policy interceptor: %v %s", err, decisionData(decision))
	}
	if e := errs.list(); len(e) > 0 {
		t.Fatalf("services met NATS errors (missing permissions?):\n%s", strings.Join(e, "\n"))
	}
	select {
	case err := <-failures:
		t.Fatal(err)
	default:
	}

	// What the roles must not do: publish outside their subjects.
	forbidden := []struct{ role, subject string }{
		{"interceptor", names.Event("perm:1", "run.started")},
		{"observer", names.Event("perm:1", "run.started")},
		{"observer", names.Inbound("http")},
		{"ingress", names.Event("perm:1", "run.started")},
		{"ingress", names.Tape("perm:1")},
		{"worker", names.Tape("perm:1")},
		{"recorder", names.Inbound("http")},
	}
	for _, f := range forbidden {
		denied := make(chan error, 1)
		nc, err := nats.Connect(srv.URL, nats.UserInfo(f.role, pw[f.role]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case denied <- err:
			default:
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(f.subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case err := <-denied:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("%s publishing to %s: %v, want a permission violation", f.role, f.subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s may publish to %s", f.role, f.subject)
		}
		nc.Close()
	}
	// The observer may subscribe to events but not to interceptor requests.
	denied := make(chan error, 1)
	nc, err := nats.Connect(srv.URL, nats.UserInfo("observer", pw["observer"]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case denied <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync(names.EventsAll()); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.SubscribeSync(names.HookAll()); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case err := <-denied:
		if !strings.Contains(err.Error(), names.HookAll()) {
			t.Errorf("observer subscription error %v, want one for %s", err, names.HookAll())
		}
	case <-time.After(5 * time.Second):
		t.Error("the observer may subscribe to interceptor requests")
	}
}

// observerAllow is the observer's subscribe allow-list in
// nats/nats-server.conf, which TestObserverNeverReadsHookRequests widens.
const observerAllow = `allow: ["bub.events.>", "bub.outbound.>", "bub.stream.>"]`

// TestObserverNeverReadsHookRequests: interceptor requests (bub.hook.>)
// carry prompts, tool arguments and turn state, so the observer user may
// never read them. It subscribes to events and receives them, and its
// subscription to bub.hook.> is a permissions violation — with the
// deployment's configuration and with the same file whose observer
// allow-list was widened to bub.>, where the explicit deny still keeps
// the hook requests away from a bub.> subscription (nats sub 'bub.>').
func TestObserverNeverReadsHookRequests(t *testing.T) {
	conf, err := os.ReadFile("nats/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), observerAllow) {
		t.Fatalf("nats/nats-server.conf has no observer allow-list %s", observerAllow)
	}
	widened := filepath.Join(t.TempDir(), "widened.conf")
	if err := os.WriteFile(widened, []byte(strings.Replace(string(conf), observerAllow, `allow: ["bub.>"]`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	names := subjects.Default()
	hookSubject := names.HookAll()
	for _, tc := range []struct{ name, conf, sub string }{
		{"deployment", "nats/nats-server.conf", names.EventsAll()},
		{"widened to bub.>", widened, "bub.>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, pw := startServerWith(t, tc.conf)
			violations := make(chan error, 4)
			observer, err := nats.Connect(srv.URL, nats.UserInfo("observer", pw["observer"]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				violations <- err
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer observer.Close()
			seen, err := observer.SubscribeSync(tc.sub)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := observer.SubscribeSync(hookSubject); err != nil {
				t.Fatal(err)
			}
			if err := observer.Flush(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-violations:
				if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), hookSubject) {
					t.Fatalf("observer subscribing to %s: %v, want a permissions violation for it", hookSubject, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the observer may subscribe to %s", hookSubject)
			}
			// A hook request, then an event, from one connection: the
			// observer gets the event first, so the request never came.
			admin, err := nats.Connect(srv.URL, nats.UserInfo("admin", pw["admin"]))
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			event := names.Event("s", "run.started")
			for _, subj := range []string{names.Hook("policy", string(hooks.HookBeforeToolCall)), event} {
				if err := admin.Publish(subj, []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if err := admin.Flush(); err != nil {
				t.Fatal(err)
			}
			m, err := seen.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("the observer got no event on %s: %v", tc.sub, err)
			}
			if m.Subject != event {
				t.Fatalf("the observer's %s subscription got %s", tc.sub, m.Subject)
			}
			select {
			case err := <-violations:
				t.Fatalf("the observer met another error: %v", err)
			default:
			}
		})
	}
}

// TestNATSConfigSyncFromEnv: the shipped server config takes its
// JetStream sync interval from BUB_JS_SYNC (compose passes always), and
// its max_payload is the embedded server's.
func TestNATSConfigSyncFromEnv(t *testing.T) {
	for _, r := range roles {
		t.Setenv("BUB_NATS_"+strings.ToUpper(r)+"_PASSWORD", "pw")
	}
	for v, want := range map[string]struct {
		always   bool
		interval time.Duration
	}{"always": {true, 2 * time.Minute}, "1s": {false, time.Second}} {
		t.Setenv("BUB_JS_SYNC", v)
		opts, err := server.ProcessConfigFile("nats/nats-server.conf")
		if err != nil {
			t.Fatal(err)
		}
		if opts.SyncAlways != want.always || opts.SyncInterval != want.interval {
			t.Errorf("BUB_JS_SYNC=%s: sync always %v interval %v", v, opts.SyncAlways, opts.SyncInterval)
		}
		if opts.MaxPayload != natsx.MaxPayload {
			t.Errorf("max_payload %d, want the embedded server's %d", opts.MaxPayload, natsx.MaxPayload)
		}
	}
}

// TestNATSClusterConfig: nats/nats-cluster.conf is nats-server.conf (the
// same users, JetStream, fsync and max_payload) with the server name from
// BUB_NATS_SERVER_NAME, routes to the three compose servers and lame
// duck; three servers started from it (routes moved to loopback) form one
// JetStream cluster that holds an R3 stream, and every role's user logs
// in on each server.
func TestNATSClusterConfig(t *testing.T) {
	pw := map[string]string{}
	for _, r := range roles {
		pw[r] = "pw-" + r
		t.Setenv("BUB_NATS_"+strings.ToUpper(r)+"_PASSWORD", pw[r])
	}
	t.Setenv("BUB_JS_SYNC", "always")
	parse := func(name string) *server.Options {
		t.Setenv("BUB_NATS_SERVER_NAME", name)
		opts, err := server.ProcessConfigFile("nats/nats-cluster.conf")
		if err != nil {
			t.Fatal(err)
		}
		return opts
	}
	single, err := server.ProcessConfigFile("nats/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	opts := parse("nats-2")
	var routes []string
	for _, u := range opts.Routes {
		routes = append(routes, u.Host)
	}
	if opts.ServerName != "nats-2" || opts.Cluster.Name != "bub" || opts.Cluster.Port != 6222 ||
		strings.Join(routes, ",") != "nats-1:6222,nats-2:6222,nats-3:6222" {
		t.Errorf("server %q, cluster %q port %d, routes %v", opts.ServerName, opts.Cluster.Name, opts.Cluster.Port, routes)
	}
	if !opts.SyncAlways || opts.StoreDir != single.StoreDir || opts.HTTPPort != single.HTTPPort || opts.MaxPayload != single.MaxPayload || len(opts.Users) != len(single.Users) || len(opts.Users) != len(roles) {
		t.Errorf("not nats-server.conf's JetStream, monitoring, max_payload and users: sync always %v, store %q, http %d, max_payload %d, %d users (want %d)",
			opts.SyncAlways, opts.StoreDir, opts.HTTPPort, opts.MaxPayload, len(opts.Users), len(single.Users))
	}
	if opts.LameDuckDuration != 30*time.Second || opts.LameDuckGracePeriod != 2*time.Second {
		t.Errorf("lame duck %v, grace %v", opts.LameDuckDuration, opts.LameDuckGracePeriod)
	}

	cl := natstest.StartClusterWith(t, 3, func(i int) *server.Options {
		o := parse(fmt.Sprintf("nats-%d", i+1))
		o.HTTPPort, o.Port, o.StoreDir = 0, 0, ""
		return o
	})
	admin, err := nats.Connect(cl.URL, nats.UserInfo("admin", pw["admin"]))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, _ := jetstream.New(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() (bool, string) {
		info, err := st.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2, fmt.Sprintf("cluster %+v", info.Cluster)
	})
	for _, s := range cl.Servers {
		for _, r := range roles {
			nc, err := nats.Connect(s.URL, nats.UserInfo(r, pw[r]), nats.MaxReconnects(0))
			if err != nil {
				t.Errorf("%s on %s: %v", r, s.Name(), err)
				continue
			}
			nc.Close()
		}
	}
}
