package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// guard implements before_tool_call (panicking for the tool "boom"),
// after_tool_call, and run_model, which no interceptor can serve; it counts
// its lifecycle calls.
type guard struct {
	started, closed atomic.Int32
}

func (*guard) Name() string { return "guard" }

func (g *guard) Start(context.Context) error {
	g.started.Add(1)
	return nil
}

func (g *guard) Close(context.Context) error {
	g.closed.Add(1)
	return nil
}

func (*guard) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	if in.Call.Tool == "boom" {
		panic("policy bug")
	}
	return nil, nil
}

func (*guard) AfterToolCall(context.Context, hooks.AfterToolCallInput) error { return nil }

func (*guard) RunModel(context.Context, hooks.RunModelInput) (string, bool, error) {
	return "", false, nil
}

// natsTimeout bounds the tests' raw NATS requests.
const natsTimeout = 5 * time.Second

func serve(t *testing.T, nc *nats.Conn, names subjects.Names, p hooks.Plugin, opts ...interceptor.Option) *interceptor.Service {
	t.Helper()
	svc, err := interceptor.Serve(t.Context(), nc, names, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	return svc
}

// TestEndpoints: one endpoint per servable hook at
// <prefix>.hook.<service>.<hook>, the service name as queue group.
func TestEndpoints(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Conn(t)
	names, err := subjects.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	svc := serve(t, nc, names, &guard{}, interceptor.WithName("policy-v2"), interceptor.WithVersion("2.1.0"))
	if got, want := svc.Hooks(), []hooks.Hook{hooks.HookBeforeToolCall, hooks.HookAfterToolCall}; !slices.Equal(got, want) {
		t.Errorf("hooks = %v, want %v", got, want)
	}
	subj, err := micro.ControlSubject(micro.InfoVerb, "policy-v2", "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.Conn(t).Request(subj, nil, natsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != "policy-v2" || info.Version != "2.1.0" {
		t.Errorf("info %+v", info.ServiceIdentity)
	}
	var got []string
	for _, ep := range info.Endpoints {
		got = append(got, ep.Name+" "+ep.Subject+" "+ep.QueueGroup)
	}
	want := []string{
		"before_tool_call acme.hook.policy-v2.before_tool_call policy-v2",
		"after_tool_call acme.hook.policy-v2.after_tool_call policy-v2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints = %q, want %q", got, want)
	}
}

// serveGuard serves guard under the default names on a new server and
// returns another connection to it and the subject of guard's
// before_tool_call endpoint.
func serveGuard(t *testing.T) (*nats.Conn, string) {
	t.Helper()
	s := natstest.Start(t)
	names := subjects.Default()
	serve(t, s.Conn(t), names, &guard{})
	return s.Conn(t), names.Hook("guard", string(hooks.HookBeforeToolCall))
}

// TestErrorReplies: a panic, an undecodable request, a request with a
// member of the wrong type, a request for another hook and a bad deadline each get a NATS micro error reply whose
// body keeps the error's kind.
func TestErrorReplies(t *testing.T) {
	nc, subject := serveGuard(t)
	for _, c := range []struct {
		name, body, deadline, code, kind string
	}{
		{"panic", `{"hook": "before_tool_call", "input": {"call": {"tool": "boom"}}}`, "", "500", "unknown"},
		{"undecodable", `{"hook": `, "", "400", "invalid_input"},
		{"mistyped", `{"hook": "before_tool_call", "state": ["not", "an", "object"]}`, "", "400", "invalid_input"},
		{"wrong_hook", `{"hook": "after_tool_call", "input": {}}`, "", "400", "invalid_input"},
		{"bad_deadline", `{"hook": "before_tool_call", "input": {}}`, "tomorrow", "400", "invalid_input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &nats.Msg{Subject: subject, Data: []byte(c.body), Header: nats.Header{}}
			if c.deadline != "" {
				m.Header[subjects.HeaderDeadline] = []string{c.deadline}
			}
			resp, err := nc.RequestMsg(m, natsTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Header.Get(micro.ErrorCodeHeader); got != c.code || resp.Header.Get(micro.ErrorHeader) == "" {
				t.Errorf("error headers %v, want code %s and a description", resp.Header, c.code)
			}
			var body struct {
				Error struct{ Kind, Message string }
			}
			if err := json.Unmarshal(resp.Data, &body); err != nil || body.Error.Kind != c.kind || body.Error.Message == "" {
				t.Errorf("body %s, want an error of kind %s", resp.Data, c.kind)
			}
		})
	}
}

// verbose denies every tool call with a 2 MiB message.
type verbose struct{}

func (verbose) Name() string { return "verbose" }

func (verbose) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return &tools.Decision{Action: tools.ActionDeny, Message: strings.Repeat("x", 2<<20)}, nil
}

// TestReplyLargerThanMaxPayload: a reply the NATS server does not take
// (over its default max_payload, 1 MiB) is answered at once with a config
// error that names both sizes, not left to the caller's timeout.
func TestReplyLargerThanMaxPayload(t *testing.T) {
	s := natstest.Start(t)
	names := subjects.Default()
	serve(t, s.Conn(t), names, verbose{})
	begin := time.Now()
	resp, err := s.Conn(t).Request(names.Hook("verbose", string(hooks.HookBeforeToolCall)), []byte(`{"hook": "before_tool_call", "input": {"call": {"tool": "bash"}}}`), natsTimeout)
	if err != nil {
		t.Fatalf("request: %v (after %v)", err, time.Since(begin))
	}
	var body struct {
		Error struct{ Kind, Message string }
	}
	if err := json.Unmarshal(resp.Data, &body); err != nil || body.Error.Kind != "config" || !strings.Contains(body.Error.Message, "max_payload 1048576") {
		t.Errorf("reply %.300s, want a config error naming max_payload 1048576", resp.Data)
	}
	if got := resp.Header.Get(micro.ErrorCodeHeader); got == "" {
		t.Errorf("error headers %v, want a NATS micro error", resp.Header)
	}
}

// TestLifecycle: Serve starts a plugin that is a hooks.Starter, Stop
// closes a hooks.Closer once, and a stopped service has no responders.
func TestLifecycle(t *testing.T) {
	s := natstest.Start(t)
	names := subjects.Default()
	g := &guard{}
	svc, err := interceptor.Serve(t.Context(), s.Conn(t), names, g)
	if err != nil {
		t.Fatal(err)
	}
	if g.started.Load() != 1 || g.closed.Load() != 0 {
		t.Fatalf("after Serve: started %d, closed %d", g.started.Load(), g.closed.Load())
	}
	for range 2 {
		if err := svc.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if g.closed.Load() != 1 {
		t.Errorf("closed %d times, want once", g.closed.Load())
	}
	nc := s.Conn(t)
	if _, err := nc.Request(names.Hook("guard", string(hooks.HookBeforeToolCall)), []byte(`{}`), natsTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("request after Stop: %v, want no responders", err)
	}
}

type nothing struct{}

func (nothing) Name() string { return "nothing" }

// TestServeValidates: Serve rejects names NATS micro rejects, plugins
// without a servable hook, and nil arguments.
func TestServeValidates(t *testing.T) {
	s := natstest.Start(t)
	nc, names := s.Conn(t), subjects.Default()
	for name, serve := range map[string]func() (*interceptor.Service, error){
		"dotted name": func() (*interceptor.Service, error) {
			return interceptor.Serve(t.Context(), nc, names, &guard{}, interceptor.WithName("a.b"))
		},
		"no hooks": func() (*interceptor.Service, error) { return interceptor.Serve(t.Context(), nc, names, nothing{}) },
		"nil conn": func() (*interceptor.Service, error) { return interceptor.Serve(t.Context(), nil, names, &guard{}) },
		"bad version": func() (*interceptor.Service, error) {
			return interceptor.Serve(t.Context(), nc, names, &guard{}, interceptor.WithVersion("two"))
		},
		"concurrency 0": func() (*interceptor.Service, error) {
			return interceptor.Serve(t.Context(), nc, names, &guard{}, interceptor.WithConcurrency(0))
		},
	} {
		if _, err := serve(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// gate is a before_tool_call plugin whose calls wait until open is closed
// (or their deadline passes); each call that enters sends on entered, and
// maxSeen keeps the largest number running at once.
type gate struct {
	open             chan struct{}
	entered          chan struct{}
	running, maxSeen atomic.Int32
}

func (*gate) Name() string { return "gate" }

func (g *gate) BeforeToolCall(ctx context.Context, _ hooks.BeforeToolCallInput) (*tools.Decision, error) {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.maxSeen.Load(); n > m && !g.maxSeen.CompareAndSwap(m, n); m = g.maxSeen.Load() {
	}
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	return nil, nil
}

// TestConcurrency: without WithConcurrency the service runs one call at a
// time; WithConcurrency(3) runs three at once on one connection, as three
// instances that each answer NATS micro's ping, and Stop stops them all.
// The queue group hands each request to an instance at random, so the
// test sends enough calls (30) that every instance gets some: the chance
// that one gets none is 3·(2/3)^30, about 1 in 60,000.
func TestConcurrency(t *testing.T) {
	const calls = 30
	for _, n := range []int{1, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := natstest.Start(t)
			names := subjects.Default()
			g := &gate{open: make(chan struct{}), entered: make(chan struct{}, calls)}
			var opts []interceptor.Option
			if n > 1 {
				opts = append(opts, interceptor.WithConcurrency(n))
			}
			svc := serve(t, s.Conn(t), names, g, opts...)
			var once sync.Once
			release := func() { once.Do(func() { close(g.open) }) }
			t.Cleanup(release) // before serve's cleanup stops the service

			nc := s.Conn(t)
			if got := pingInstances(t, nc, "gate"); got != n {
				t.Errorf("%d instances answered the ping, want %d", got, n)
			}

			subj := names.Hook("gate", string(hooks.HookBeforeToolCall))
			errc := make(chan error, calls)
			for range calls {
				go func() {
					_, err := nc.Request(subj, []byte(`{"hook": "before_tool_call", "input": {}}`), natsTimeout)
					errc <- err
				}()
			}
			for i := range n {
				select {
				case <-g.entered:
				case <-time.After(natsTimeout):
					t.Fatalf("%d calls entered the plugin, want %d at once", i, n)
				}
			}
			select {
			case <-g.entered:
				t.Fatalf("more than %d calls ran at once", n)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			var bad int
			var last error
			for range calls {
				if err := <-errc; err != nil {
					bad++
					last = err
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d calls failed, the last with %v", bad, calls, last)
			}
			if got := g.maxSeen.Load(); got != int32(n) {
				t.Errorf("%d calls ran at once, want %d", got, n)
			}
			if err := svc.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := pingInstances(t, nc, "gate"); got != 0 {
				t.Errorf("%d instances answered the ping after Stop", got)
			}
		})
	}
}

// pingInstances returns how many instances of service answer NATS micro's
// ping (remote.Discover, each within 200ms of the one before).
func pingInstances(t *testing.T, nc *nats.Conn, service string) int {
	t.Helper()
	replies, err := remote.Discover(t.Context(), nc, micro.PingVerb, service, natsTimeout, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, raw := range replies {
		var p micro.Ping
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		ids[p.ID] = true
	}
	return len(ids)
}
