package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/tools"
)

// allow is a before_tool_call and after_tool_call plugin without opinions.
type allow struct{}

func (allow) Name() string { return "allow" }

func (allow) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

func (allow) AfterToolCall(context.Context, hooks.AfterToolCallInput) error { return nil }

// TestDiscoveryCountsInstancesAndHooks: two instances of one service on
// separate connections are discovered as one plugin serving exactly the
// hooks they implement, and `bub hooks` shows it as remote.
func TestDiscoveryCountsInstancesAndHooks(t *testing.T) {
	e := newEnv(t)
	for _, nc := range []*nats.Conn{e.serverNC, e.srv.Conn(t)} {
		svc, err := interceptor.Serve(t.Context(), nc, e.names, allow{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	}
	p, reg, _ := e.client(t, remote.Config{Service: "allow"})
	for _, h := range remote.Hooks() {
		want := h == hooks.HookBeforeToolCall || h == hooks.HookAfterToolCall
		if p.ServesHook(h) != want {
			t.Errorf("ServesHook(%s) = %v, want %v", h, !want, want)
		}
	}
	d := p.Describe()
	if !d.Remote || d.Service != "allow" || !strings.Contains(d.Detail, "2 instances") || !strings.Contains(d.Detail, "fail-open") {
		t.Errorf("description %+v", d)
	}
	report := reg.Report().String()
	want := "before_tool_call [chained, in run order; a decision stops the chain; failures isolated]: allow (remote: allow: 2 instances, timeout 2s, fail-open)\n"
	if !strings.Contains(report, want) {
		t.Errorf("report:\n%s\nwant a line\n%s", report, want)
	}
	for range 20 {
		if _, err := p.BeforeToolCall(t.Context(), toolCall()); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.OK != 20 {
		t.Errorf("stats = %+v, want 20 ok", st)
	}
}

// TestDiscoveryWithoutInstances: a fail-open interceptor nobody serves
// starts and serves nothing; a fail-closed one refuses to start unless its
// hooks are configured, in which case it guards them while absent.
func TestDiscoveryWithoutInstances(t *testing.T) {
	e := newEnv(t)
	open, err := remote.New(e.clientNC, e.names, remote.Config{Service: "absent"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Start(t.Context()); err != nil {
		t.Fatalf("fail-open start: %v", err)
	}
	if open.ServesHook(hooks.HookBeforeToolCall) || !strings.Contains(open.Describe().Detail, "0 instances") {
		t.Errorf("fail-open without instances serves before_tool_call or says %q", open.Describe().Detail)
	}

	closed, err := remote.New(e.clientNC, e.names, remote.Config{Service: "absent", Failure: remote.FailClosed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Start(t.Context()); err == nil || !strings.Contains(err.Error(), remote.EnvHooks("absent")) {
		t.Errorf("fail-closed start: %v, want an error pointing at %s", err, remote.EnvHooks("absent"))
	}

	listed, err := remote.New(e.clientNC, e.names, remote.Config{Service: "absent", Failure: remote.FailClosed, Hooks: []hooks.Hook{hooks.HookBeforeToolCall}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := listed.Start(t.Context()); err != nil {
		t.Fatalf("fail-closed start with hooks: %v", err)
	}
	dec, err := listed.BeforeToolCall(t.Context(), toolCall())
	if err != nil || dec == nil || dec.Action != tools.ActionDeny {
		t.Errorf("decision %+v, %v; want a denial", dec, err)
	}
}

// TestRegisteredBeforeStart: the registry decides which hooks a plugin
// serves at registration, so a plugin that discovers its hooks must start
// first; Start says so instead of silently serving nothing.
func TestRegisteredBeforeStart(t *testing.T) {
	e := newEnv(t)
	e.serve(t, "allow", allow{})
	p, err := remote.New(e.clientNC, e.names, remote.Config{Service: "allow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := hooks.New[struct{}, struct{}]()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "registered before it was started") {
		t.Errorf("Start: %v, want a registered-before-started error", err)
	}
}

// TestDiscover: with no service running Discover answers at once with no
// replies; it collects one reply per instance of every service, or of the
// one service named; a subject nobody answers in time is an error.
func TestDiscover(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	replies, err := remote.Discover(t.Context(), e.clientNC, micro.InfoVerb, "", 5*time.Second, 50*time.Millisecond)
	if err != nil || len(replies) != 0 || time.Since(start) > 2*time.Second {
		t.Fatalf("no services: %d replies, %v after %s; want none at once", len(replies), err, time.Since(start))
	}
	e.serve(t, "allow", allow{})
	e.serve(t, "allow", allow{})
	e.serve(t, "other", allow{})
	names := func(verb micro.Verb, service string) []string {
		replies, err := remote.Discover(t.Context(), e.clientNC, verb, service, 5*time.Second, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range replies {
			var info micro.Info
			if err := json.Unmarshal(r, &info); err != nil {
				t.Fatal(err)
			}
			out = append(out, info.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(micro.InfoVerb, ""); !slices.Equal(got, []string{"allow", "allow", "other"}) {
		t.Errorf("every service: %v", got)
	}
	if got := names(micro.StatsVerb, "other"); !slices.Equal(got, []string{"other"}) {
		t.Errorf("service other: %v", got)
	}
	// A responder that never answers: the first reply does not come.
	sub, err := e.serverNC.Subscribe("$SRV.PING.silent", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.serverNC.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Discover(t.Context(), e.clientNC, micro.PingVerb, "silent", 100*time.Millisecond, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent service: %v, want a deadline error", err)
	}
}
