package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/ingresscmd"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/internal/recordercmd"
	"github.com/bubbus/bub/internal/stack"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/internal/workercmd"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// policy is a remote interceptor with no opinion on any call.
type policy struct{}

func (policy) Name() string { return "policy" }
func (policy) BeforeLLMCall(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	return nil, nil, nil
}
func (policy) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

// TestOneTracePerTurnAcrossServices runs ingress, a worker, a remote
// interceptor service and the recorder against one NATS server, each over
// its own connection (nothing but NATS messages connects them, as between
// processes), with one in-memory span recorder. A turn with two LLM calls
// (the first asks for one tool call) must produce one trace whose
// parent/child chain is
//
//	POST /v1/messages                          ingress (server)
//	└ send bub.inbound.http                    ingress (producer)
//	  └ process BUB_INBOUND                    worker (consumer: the turn)
//	    ├ invoke_agent                         worker
//	    │ ├ chat fake                          worker (client), 2×
//	    │ │ └ send bub.hook.policy.before_llm_call       worker (client)
//	    │ │   └ process bub.hook.policy.before_llm_call  interceptor (server)
//	    │ ├ execute_tool tape_info             worker
//	    │ │ └ send bub.hook.policy.before_tool_call      worker (client)
//	    │ │   └ process bub.hook.policy.before_tool_call interceptor (server)
//	    │ └ commit tape                        recorder (consumer)
//	    └ receive bub.outbound.http.<session>  ingress (consumer)
func TestOneTracePerTurnAcrossServices(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	_, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{ToolCalls: []fakellm.ToolCall{{Name: "tape_info"}}},
		{Text: "done"},
	}})
	srv := natstest.Start(t)
	common := &cli.Common{Home: t.TempDir(), Prefix: "bub", LogLevel: "info", LogFormat: "text", NATS: natsx.ClientConfig{URL: srv.URL}}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	names := common.Names()
	topo := natsx.Topology{MemoryStorage: true}

	// The interceptor service, on its own connection.
	inc := srv.Conn(t)
	svc, err := interceptor.Serve(t.Context(), inc, names, policy{}, interceptor.WithTraceContext(telemetry.ContextWithTrace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

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
	cl, err := stack.Open(common, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	running, err := stack.StartServices(t.Context(), cl, stack.Services{
		Ingress:  &ingresscmd.Options{Listener: ln, Topology: topo, Instance: "i"},
		Workers:  1,
		Worker:   workercmd.Options{Topology: topo, Instance: "w", Models: models, Workspace: t.TempDir(), Interceptors: []remote.Config{{Service: "policy"}}},
		Recorder: &recordercmd.Options{Topology: topo, Instance: "r"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := running.Stop(); err != nil {
			t.Error(err)
		}
		cl.Shutdown()
	})

	// An independent observer of the session's lifecycle events.
	observed, err := srv.Conn(t).SubscribeSync(names.EventsOf("trace:1"))
	if err != nil {
		t.Fatal(err)
	}

	body, _ := json.Marshal(map[string]string{"content": "use a tool", "session_id": "trace:1"})
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/messages?wait=30s", "application/json", bytes.NewReader(body))
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

	hookSubject := func(h hooks.Hook) string { return "process " + names.Hook("policy", string(h)) }
	want := map[string]int{
		"POST /v1/messages":                   1,
		"send " + names.Inbound("http"):       1,
		"process " + names.InboundStream():    1,
		"invoke_agent":                        1,
		"chat fake":                           2,
		"execute_tool tape_info":              1,
		hookSubject(hooks.HookBeforeLLMCall):  2,
		hookSubject(hooks.HookBeforeToolCall): 1,
		"send " + names.Hook("policy", string(hooks.HookBeforeLLMCall)):  2,
		"send " + names.Hook("policy", string(hooks.HookBeforeToolCall)): 1,
		"commit tape": 1,
		"receive " + names.Outbound("http", "trace:1"): 1,
	}
	var spans []sdktrace.ReadOnlySpan
	natstest.Eventually(t, 30*time.Second, func() (bool, string) {
		spans = rec.Ended()
		got := map[string]int{}
		for _, s := range spans {
			got[s.Name()]++
		}
		for name, n := range want {
			if got[name] < n {
				return false, fmt.Sprintf("span %q ended %d times, want %d; have %v", name, got[name], n, got)
			}
		}
		return true, ""
	})

	root := only(t, spans, "POST /v1/messages")
	if root.Parent().IsValid() {
		t.Errorf("the HTTP span has a parent: %v", root.Parent())
	}
	traceID := root.SpanContext().TraceID()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if _, ok := want[s.Name()]; !ok {
			continue
		}
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
		byID[s.SpanContext().SpanID()] = s
	}
	parentName := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID()]; ok {
			return p.Name()
		}
		return "(none)"
	}
	chain := map[string]string{
		"send " + names.Inbound("http"):       "POST /v1/messages",
		"process " + names.InboundStream():    "send " + names.Inbound("http"),
		"invoke_agent":                        "process " + names.InboundStream(),
		"chat fake":                           "invoke_agent",
		"execute_tool tape_info":              "invoke_agent",
		hookSubject(hooks.HookBeforeLLMCall):  "send " + names.Hook("policy", string(hooks.HookBeforeLLMCall)),
		hookSubject(hooks.HookBeforeToolCall): "send " + names.Hook("policy", string(hooks.HookBeforeToolCall)),
		"send " + names.Hook("policy", string(hooks.HookBeforeToolCall)): "execute_tool tape_info",
		"commit tape": "invoke_agent",
		"receive " + names.Outbound("http", "trace:1"): "process " + names.InboundStream(),
	}
	for _, s := range spans {
		if wantParent, ok := chain[s.Name()]; ok {
			if got := parentName(s); got != wantParent {
				t.Errorf("span %q: parent %q, want %q", s.Name(), got, wantParent)
			}
		}
	}
	// The two before_llm_call requests belong to the two distinct calls.
	var llmParents []trace.SpanID
	for _, s := range spans {
		if s.Name() == "send "+names.Hook("policy", string(hooks.HookBeforeLLMCall)) {
			llmParents = append(llmParents, s.Parent().SpanID())
		}
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(idStrings(llmParents)))); len(distinct) != 2 {
		t.Errorf("before_llm_call requests share a parent: %v", llmParents)
	}
	// Every lifecycle CloudEvent carries the turn's trace (extension and
	// header alike).
	_, js := srv.JetStream(t)
	stream, err := js.Stream(t.Context(), names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context(), jetstream.WithSubjectFilter(names.EventsOf("trace:1")))
	if err != nil {
		t.Fatal(err)
	}
	nEvents := 0
	for _, n := range info.State.Subjects {
		nEvents += int(n)
	}
	for range nEvents {
		msg, err := observed.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("observer: %v", err)
		}
		ev, err := events.FromMsg(msg)
		if err != nil {
			t.Fatal(err)
		}
		tp, ts := events.Traceparent(ev)
		if sc := telemetry.SpanContextOf(tp, ts); sc.TraceID() != traceID {
			t.Errorf("event %s has traceparent %q, want trace %s", ev.Type(), tp, traceID)
		}
		if msg.Header.Get(subjects.HeaderTraceparent) != tp {
			t.Errorf("event %s: header traceparent %q, extension %q", ev.Type(), msg.Header.Get(subjects.HeaderTraceparent), tp)
		}
	}
	if nEvents < 8 {
		t.Errorf("observed %d lifecycle events, want the whole run", nEvents)
	}
	if t.Failed() || testing.Verbose() {
		for _, s := range spans {
			t.Logf("%s %s parent=%s(%s)", s.SpanContext().SpanID(), s.Name(), s.Parent().SpanID(), parentName(s))
		}
	}
	if chat := spansNamed(spans, "chat fake"); len(chat) == 2 {
		for _, s := range chat {
			if !strings.Contains(fmt.Sprint(s.Attributes()), "gen_ai.usage.input_tokens") {
				t.Errorf("chat span without token usage: %v", s.Attributes())
			}
		}
	}
}

func only(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := spansNamed(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans %q, want 1", len(got), name)
	}
	return got[0]
}

func spansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func idStrings(ids []trace.SpanID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
