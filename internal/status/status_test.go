package status_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/service"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

type auditPlugin struct{}

func (auditPlugin) Name() string { return "audit" }
func (auditPlugin) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

// TestStatus runs two workers and the recorder, answers three messages,
// serves an interceptor, and checks what Collect reports (what `bub
// status` prints: the workers by instance from NATS micro discovery) and
// the hook report a worker answers.
func TestStatus(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{Instance: "st", Workers: 2})
	conn := c.Conn
	svc, err := interceptor.Serve(t.Context(), c.NATS.Conn(t), conn.Names, auditPlugin{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	for _, s := range []string{"a", "b", "c"} {
		env := &envelope.Envelope{ID: "st-" + s, Content: "hi " + s, Channel: "test", SessionID: "status:" + s}
		if outs := c.Turn(t, env); len(outs) != 1 {
			t.Fatalf("reply to %s: %v", env.ID, outs)
		}
	}
	wctx, cancel := context.WithTimeout(t.Context(), stacktest.Wait)
	defer cancel()
	if err := stack.WaitRecorded(wctx, conn); err != nil {
		t.Fatal(err)
	}

	st := status.Collect(t.Context(), conn.NC, conn.JS, conn.Names)
	if len(st.Errors) > 0 {
		t.Fatalf("errors: %v", st.Errors)
	}
	if st.Server.MaxPayload != natsx.MaxPayload {
		t.Errorf("max_payload %d, want %d", st.Server.MaxPayload, natsx.MaxPayload)
	}
	streams := map[string]status.Stream{}
	for _, s := range st.Streams {
		streams[s.Name] = s
	}
	if s := streams[conn.Names.OutboundStream()]; s.Messages != 3 {
		t.Errorf("outbound stream: %+v, want 3 messages", s)
	}
	if s := streams[conn.Names.EventsStream()]; s.Messages == 0 {
		t.Errorf("events stream is empty: %+v", s)
	}
	if st.Recorder == nil || st.Recorder.Lag != 0 {
		t.Errorf("recorder: %+v, want no lag", st.Recorder)
	}
	natstest.Eventually(t, stacktest.Wait, func() (bool, string) {
		st := status.Collect(t.Context(), conn.NC, conn.JS, conn.Names)
		ws := st.Workers.Instances
		if len(ws) != 2 || ws[0].Instance != "st-w0" || ws[1].Instance != "st-w1" {
			return false, fmt.Sprintf("worker instances %+v (errors %v), want st-w0 and st-w1", ws, st.Errors)
		}
		for _, w := range ws {
			if w.Concurrency != 256 || w.RunningTurns != 0 || w.Version != service.MicroVersion(cli.Version()) || w.ID == "" || w.Started.IsZero() {
				return false, fmt.Sprintf("worker %+v: want concurrency 256 (consuming), no running turn, version %s, an id and a start", w, service.MicroVersion(cli.Version()))
			}
		}
		return true, ""
	})
	var services []string
	for _, si := range st.Services {
		services = append(services, si.Service+"/"+si.Instance)
		if si.MaxPayload != natsx.MaxPayload || si.ID == "" || si.Started.IsZero() {
			t.Errorf("service %+v: want max_payload %d, an id and a start", si, natsx.MaxPayload)
		}
	}
	if got, want := strings.Join(services, " "), "recorder/st worker/st-w0 worker/st-w1"; got != want {
		t.Errorf("services %s, want %s", got, want)
	}
	if len(st.Interceptors) != 1 || st.Interceptors[0].Service != "audit" || strings.Join(st.Interceptors[0].Hooks, ",") != string(hooks.HookBeforeToolCall) || st.Interceptors[0].Plugin != "audit" {
		t.Errorf("interceptors: %+v", st.Interceptors)
	}
	consumers := map[string]bool{}
	for _, c := range st.Consumers {
		consumers[c.Stream+"/"+c.Name] = true
	}
	if !consumers[conn.Names.InboundStream()+"/"+conn.Names.WorkerConsumer()] || !consumers[conn.Names.EventsStream()+"/"+conn.Names.RecorderConsumer()] || len(consumers) != 2 {
		t.Errorf("consumers %v, want the workers' and the recorder's only", consumers)
	}

	rep, err := status.AskHooks(wctx, conn.NC, conn.Names)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Instance, "st-w") {
		t.Errorf("hook report answered by %q, want a worker st-w…", rep.Instance)
	}
	impls := map[hooks.Hook][]string{}
	for _, h := range rep.Hooks {
		for _, im := range h.Impls {
			impls[h.Hook] = append(impls[h.Hook], im.Plugin)
		}
	}
	if got := impls[hooks.HookResolveSession]; len(got) != 1 || got[0] != "builtin" {
		t.Errorf("resolve_session implementations %v, want [builtin] (report %+v)", got, rep)
	}
}

// TestAskHooksWithoutWorkers: with no worker running, AskHooks says so
// at once instead of timing out.
func TestAskHooksWithoutWorkers(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := status.AskHooks(ctx, srv.Conn(t), subjects.Default()); !errors.Is(err, status.ErrNoWorker) {
		t.Fatalf("AskHooks without workers: %v, want ErrNoWorker", err)
	}
	if ctx.Err() != nil {
		t.Fatal("AskHooks waited for its deadline")
	}
}

// TestStatusWarnsAboutASmallMaxPayload: on a server left at nats-server's
// default max_payload (1 MiB), Collect reports it with a warning that
// names both sizes.
func TestStatusWarnsAboutASmallMaxPayload(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.JetStream(t)
	st := status.Collect(t.Context(), nc, js, subjects.Default())
	if st.Server.MaxPayload != 1<<20 {
		t.Errorf("max_payload %d, want nats-server's default %d", st.Server.MaxPayload, 1<<20)
	}
	want := fmt.Sprintf("max_payload: the server takes messages of at most %d bytes, Bub's configs %d", 1<<20, natsx.MaxPayload)
	if !slices.ContainsFunc(st.Errors, func(e string) bool { return strings.HasPrefix(e, want) }) {
		t.Errorf("errors %q, want one starting %q", st.Errors, want)
	}
}

// TestStatusWarnsAboutAServiceWithAnotherMaxPayload: a service connected
// to a server that took 1 MiB messages goes on sending by that limit
// after the server's configuration is reloaded to take 8 MiB (nats.go
// learns max_payload only when it connects). Collect lists the instance
// with the max_payload it sends by and warns that it must be restarted,
// naming both sizes.
func TestStatusWarnsAboutAServiceWithAnotherMaxPayload(t *testing.T) {
	s := natstest.Start(t)
	common := &cli.Common{}
	conn, err := service.NewConn(s.Conn(t), common, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Announce("recorder", "mp-1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	s.Reload(t, func(o *server.Options) { o.MaxPayload = natsx.MaxPayload })

	nc, js := s.JetStream(t)
	st := status.Collect(t.Context(), nc, js, common.Names())
	if st.Server.MaxPayload != natsx.MaxPayload {
		t.Fatalf("the server's max_payload %d, want %d after the reload", st.Server.MaxPayload, natsx.MaxPayload)
	}
	if len(st.Services) != 1 || st.Services[0].Service != "recorder" || st.Services[0].Instance != "mp-1" || st.Services[0].MaxPayload != 1<<20 {
		t.Fatalf("services %+v, want recorder mp-1 sending by max_payload %d", st.Services, 1<<20)
	}
	want := fmt.Sprintf("max_payload: recorder mp-1 sends messages of at most %d bytes (its server's max_payload when it connected); the server at %s takes %d: restart it",
		1<<20, st.Server.URL, natsx.MaxPayload)
	if !slices.ContainsFunc(st.Errors, func(e string) bool { return strings.HasPrefix(e, want) }) {
		t.Errorf("errors %q, want one starting %q", st.Errors, want)
	}
}
