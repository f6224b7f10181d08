package bubcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/tools"
)

type auditPlugin struct{}

func (auditPlugin) Name() string { return "audit" }
func (auditPlugin) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

// TestStatus runs two workers and the recorder, answers three messages,
// serves an interceptor, and checks what `bub status` reports.
func TestStatus(t *testing.T) {
	srv := natstest.Start(t)
	common := &cli.Common{Home: t.TempDir(), Prefix: "bub", LogLevel: "info", LogFormat: "text", NATS: natsx.ClientConfig{URL: srv.URL}}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := stack.Open(common, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	topo := natsx.Topology{MemoryStorage: true}
	running, err := stack.StartServices(t.Context(), cl, stack.Services{
		Workers:  2,
		Worker:   workercmd.Options{Topology: topo, Instance: "st", Workspace: t.TempDir()},
		Recorder: &recordercmd.Options{Topology: topo, Instance: "st"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Stop() })
	conn, err := cl.Connect(t.Context(), "status-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	svc, err := interceptor.Serve(t.Context(), srv.Conn(t), conn.Names, auditPlugin{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

	gw, err := ingress.NewGateway(conn.NC, conn.JS, conn.Names, events.Source("test", "1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	for _, s := range []string{"a", "b", "c"} {
		env := &envelope.Envelope{ID: "st-" + s, Content: "hi " + s, Channel: "test", SessionID: "status:" + s}
		await := gw.Expect(env.ID)
		if _, err := gw.Publish(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		outs, err := await(ctx)
		cancel()
		if err != nil || len(outs) != 1 {
			t.Fatalf("reply to %s: %v %v", env.ID, outs, err)
		}
	}
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := stack.WaitRecorded(wctx, conn); err != nil {
		t.Fatal(err)
	}

	st := collectStatus(t.Context(), conn.NC, conn.JS, conn.Names, 100)
	if len(st.Errors) > 0 {
		t.Fatalf("errors: %v", st.Errors)
	}
	streams := map[string]streamStatus{}
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
	runs := 0
	for _, w := range st.Workers.Recent {
		if !strings.HasPrefix(w.Instance, "st-w") {
			t.Errorf("worker instance %q", w.Instance)
		}
		runs += w.Runs
	}
	if runs != 3 {
		t.Errorf("recent workers %+v: %d runs, want 3", st.Workers.Recent, runs)
	}
	if len(st.Interceptors) != 1 || st.Interceptors[0].Service != "audit" || strings.Join(st.Interceptors[0].Hooks, ",") != string(hooks.HookBeforeToolCall) || st.Interceptors[0].Plugin != "audit" {
		t.Errorf("interceptors: %+v", st.Interceptors)
	}
	consumers := map[string]bool{}
	for _, c := range st.Consumers {
		consumers[c.Stream+"/"+c.Name] = true
	}
	if !consumers[conn.Names.InboundStream()+"/"+conn.Names.WorkerConsumer()] || !consumers[conn.Names.EventsStream()+"/"+conn.Names.RecorderConsumer()] || len(consumers) != 2 {
		t.Errorf("consumers %v (the scan's own consumer must be gone)", consumers)
	}

	var b bytes.Buffer
	st.print(&b)
	for _, want := range []string{"STREAMS", conn.Names.InboundStream(), "CONSUMERS", "WORKERS", "INTERCEPTORS", "audit", "RECORDER", "lag: 0 events", "DEAD LETTERS"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, b.String())
		}
	}
}
