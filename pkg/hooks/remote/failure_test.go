package remote_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// callTimeout is the interceptor timeout of the failure tests; bound is
// how long a call may take at most, scheduling noise included.
const (
	callTimeout = 200 * time.Millisecond
	bound       = callTimeout + 2*time.Second
)

// env is one test's NATS server, connections and names.
type env struct {
	srv                *natstest.Server
	serverNC, clientNC *nats.Conn
	names              subjects.Names
}

func newEnv(t *testing.T) *env {
	s := natstest.Start(t)
	return &env{srv: s, serverNC: s.Conn(t), clientNC: s.Conn(t), names: subjects.Default()}
}

// serve hosts p as service name until the test ends.
func (e *env) serve(t *testing.T, name string, p hooks.Plugin) {
	t.Helper()
	svc, err := interceptor.Serve(t.Context(), e.serverNC, e.names, p, interceptor.WithName(name))
	if err != nil {
		t.Fatalf("serving %s: %v", name, err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
}

// respond answers every request to hook h of service with data and hdr,
// like a broken interceptor written by hand.
func (e *env) respond(t *testing.T, service string, h hooks.Hook, hdr nats.Header, data string) {
	t.Helper()
	sub, err := e.serverNC.Subscribe(e.names.Hook(service, string(h)), func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Header: hdr, Data: []byte(data)})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.serverNC.Flush(); err != nil {
		t.Fatal(err)
	}
}

// client returns a started remote plugin for cfg and a registry holding
// it, whose log records are captured.
func (e *env) client(t *testing.T, cfg remote.Config) (*remote.Plugin, *hooks.Registry[struct{}, struct{}], *logs) {
	t.Helper()
	l := &logs{}
	log := slog.New(l)
	p, err := remote.New(e.clientNC, e.names, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg := hooks.New[struct{}, struct{}](hooks.WithLogger(log))
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	return p, reg, l
}

// logs records the messages of warnings and errors.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logs) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logs) WithGroup(string) slog.Handler                 { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

func (l *logs) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// Plugins for the failure modes.

type slowTool struct{}

func (slowTool) Name() string { return "slow" }

func (slowTool) BeforeToolCall(ctx context.Context, _ hooks.BeforeToolCallInput) (*tools.Decision, error) {
	<-ctx.Done() // the caller's deadline, carried by Bub-Deadline
	return nil, ctx.Err()
}

type failingTool struct{}

func (failingTool) Name() string { return "failing" }

func (failingTool) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, bub.Errorf(bub.KindTool, "policy database unreachable")
}

func toolCall() hooks.BeforeToolCallInput {
	return hooks.BeforeToolCallInput{
		Call:  tools.Call{RunID: "run-1", Tool: "bash", Arguments: map[string]any{"cmd": "ls"}, CallID: "c1"},
		State: bub.NewState(map[string]any{bub.StateSessionID: "s1"}),
	}
}

// failure sets up a service that fails in one way and says which counter
// it moves.
type failure struct {
	name    string
	setup   func(t *testing.T, e *env, service string)
	counter func(remote.Stats) uint64
	denial  string // part of the fail-closed denial message
	// arguments replace toolCall's, when set.
	arguments map[string]any
}

func failures() []failure {
	return []failure{
		{
			name:    "no_responders",
			setup:   func(*testing.T, *env, string) {},
			counter: func(s remote.Stats) uint64 { return s.NoResponders },
			denial:  "has no running instance",
		},
		{
			name:    "timeout",
			setup:   func(t *testing.T, e *env, service string) { e.serve(t, service, slowTool{}) },
			counter: func(s remote.Stats) uint64 { return s.Timeout },
			denial:  "did not answer within 200ms",
		},
		{
			// A subscriber that never answers (nats sub 'bub.>') makes a
			// missing service a timeout instead of no_responders.
			name: "bystander",
			setup: func(t *testing.T, e *env, _ string) {
				sub, err := e.serverNC.SubscribeSync(e.names.HookAll())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = sub.Unsubscribe() })
				if err := e.serverNC.Flush(); err != nil {
					t.Fatal(err)
				}
			},
			counter: func(s remote.Stats) uint64 { return s.Timeout },
			denial:  "did not answer within 200ms",
		},
		{
			name: "malformed",
			setup: func(t *testing.T, e *env, service string) {
				e.respond(t, service, hooks.HookBeforeToolCall, nil, `{"desicion": {"action": "deny"}}`)
			},
			counter: func(s remote.Stats) uint64 { return s.Malformed },
			denial:  "sent a malformed reply",
		},
		{
			name:    "remote_error",
			setup:   func(t *testing.T, e *env, service string) { e.serve(t, service, failingTool{}) },
			counter: func(s remote.Stats) uint64 { return s.RemoteError },
			denial:  "failed: policy database unreachable",
		},
		{
			// A request the server would not take (its max_payload is
			// nats-server's default, 1 MiB) is never sent.
			name:      "too_large",
			setup:     func(t *testing.T, e *env, service string) { e.serve(t, service, failingTool{}) },
			counter:   func(s remote.Stats) uint64 { return s.Transport },
			denial:    "could not be called: its request of ",
			arguments: map[string]any{"cmd": strings.Repeat("x", 1<<20)},
		},
	}
}

// TestFailureModes checks every failure of a before_tool_call interceptor
// under both policies: fail-open skips it (the registry logs it once),
// fail-closed denies the call (the plugin logs it once); the call never
// takes longer than the timeout and the outcome is counted.
func TestFailureModes(t *testing.T) {
	for _, f := range failures() {
		for _, policy := range []remote.Policy{remote.FailOpen, remote.FailClosed} {
			t.Run(f.name+"/"+string(policy), func(t *testing.T) {
				e := newEnv(t)
				f.setup(t, e, "guard")
				p, reg, logs := e.client(t, remote.Config{
					Service: "guard", Timeout: callTimeout, Failure: policy,
					Hooks: []hooks.Hook{hooks.HookBeforeToolCall},
				})
				in := toolCall()
				if f.arguments != nil {
					in.Call.Arguments = f.arguments
				}
				begin := time.Now()
				call, dec, err := reg.BeforeToolCall(t.Context(), in)
				if took := time.Since(begin); took > bound {
					t.Errorf("call took %v, want at most %v", took, bound)
				}
				if err != nil {
					t.Fatalf("BeforeToolCall: %v", err)
				}
				switch policy {
				case remote.FailOpen:
					if dec != nil || call.Tool != "bash" {
						t.Errorf("fail-open: decision %+v, call %+v; want the call to proceed", dec, call)
					}
					if got := logs.get(); len(got) != 1 || got[0] != "hook.agent_hook_failed" {
						t.Errorf("logs = %q, want one hook.agent_hook_failed", got)
					}
				case remote.FailClosed:
					if dec == nil || dec.Action != tools.ActionDeny || !strings.Contains(dec.Message, `"guard"`) || !strings.Contains(dec.Message, f.denial) {
						t.Errorf("fail-closed: decision %+v, want a denial naming the service and saying %q", dec, f.denial)
					}
					if got := logs.get(); len(got) != 1 || got[0] != "interceptor.denied" {
						t.Errorf("logs = %q, want one interceptor.denied", got)
					}
				}
				st := p.Stats()
				if f.counter(st) != 1 || st.OK != 0 {
					t.Errorf("stats = %+v, want one %s and no ok", st, f.name)
				}
			})
		}
	}
}

// TestFailClosedAbortsLLMCall: a fail-closed before_llm_call interceptor
// that cannot answer aborts the call; a fail-open one is skipped.
func TestFailClosedAbortsLLMCall(t *testing.T) {
	for _, policy := range []remote.Policy{remote.FailOpen, remote.FailClosed} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			p, reg, _ := e.client(t, remote.Config{
				Service: "router", Timeout: callTimeout, Failure: policy,
				Hooks: []hooks.Hook{hooks.HookBeforeLLMCall},
			})
			req := llm.Request{RunID: "run-1", Model: "openai:gpt-4o"}
			got, dec, err := reg.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: req, State: bub.NewState(nil)})
			if dec != nil || got.Model != req.Model {
				t.Errorf("request %+v, decision %+v; want the request unchanged", got, dec)
			}
			ce, isCall := errors.AsType[*remote.CallError](err)
			switch {
			case policy == remote.FailOpen && err != nil:
				t.Errorf("fail-open: %v, want the interceptor skipped", err)
			case policy == remote.FailClosed && (!errors.Is(err, hooks.ErrAbort) || !isCall || ce.Outcome != remote.OutcomeNoResponders):
				t.Errorf("fail-closed: %v, want an abort caused by no responders", err)
			}
			if policy == remote.FailClosed {
				// What the user is told: Bub's error with a kind, naming
				// the hook, the interceptor and why, nothing of Go's.
				want := `before_llm_call: interceptor "router" has no running instance, and it fails closed; the call was aborted.`
				if be := bub.AsError(err); be.Kind != bub.KindTemporary || be.Message != want {
					t.Errorf("fail-closed error shown as [%s] %q, want [temporary] %q", be.Kind, be.Message, want)
				}
			}
			if st := p.Stats(); st.NoResponders != 1 {
				t.Errorf("stats = %+v, want one no_responders", st)
			}
		})
	}
}

type rejecting struct{}

func (rejecting) Name() string { return "rejecting" }

func (rejecting) ResolveSession(context.Context, hooks.ResolveSessionInput) (string, bool, error) {
	return "", false, bub.Errorf(bub.KindInvalidInput, "unknown tenant")
}

func (rejecting) SystemPrompt(context.Context, hooks.SystemPromptInput) (string, error) {
	return "", errors.New("templates missing")
}

// TestOrdinaryHooks: for hooks that propagate errors, fail-open skips an
// interceptor that cannot answer (no opinion, logged once), fail-closed
// returns the failure; an error the interceptor returns propagates under
// both policies with its kind, as a local plugin's would.
func TestOrdinaryHooks(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		for _, policy := range []remote.Policy{remote.FailOpen, remote.FailClosed} {
			t.Run(string(policy), func(t *testing.T) {
				e := newEnv(t)
				_, reg, logs := e.client(t, remote.Config{
					Service: "prompts", Timeout: callTimeout, Failure: policy,
					Hooks: []hooks.Hook{hooks.HookSystemPrompt},
				})
				got, err := reg.SystemPrompt(t.Context(), hooks.SystemPromptInput{Prompt: "hi", State: bub.NewState(nil)})
				if policy == remote.FailOpen {
					if err != nil || got != "" || len(logs.get()) != 1 {
						t.Errorf("fail-open: %q, %v, logs %q; want no fragment, no error, one log", got, err, logs.get())
					}
					return
				}
				if !errors.Is(err, nats.ErrNoResponders) {
					t.Errorf("fail-closed: %v, want the no-responders error", err)
				}
			})
		}
	})
	t.Run("remote_error", func(t *testing.T) {
		e := newEnv(t)
		e.serve(t, "rejecting", rejecting{})
		p, reg, _ := e.client(t, remote.Config{Service: "rejecting", Timeout: callTimeout})
		_, err := reg.ResolveSession(t.Context(), hooks.ResolveSessionInput{})
		be, ok := errors.AsType[*bub.Error](err)
		if !ok || be.Kind != bub.KindInvalidInput || be.Message != "unknown tenant" {
			t.Errorf("resolve_session error %v, want the interceptor's invalid_input error", err)
		}
		_, err = reg.SystemPrompt(t.Context(), hooks.SystemPromptInput{})
		if be, ok := errors.AsType[*bub.Error](err); !ok || be.Kind != bub.KindUnknown || be.Message != "templates missing" {
			t.Errorf("system_prompt error %v, want the interceptor's error as kind unknown", err)
		}
		if st := p.Stats(); st.RemoteError != 2 {
			t.Errorf("stats = %+v, want two remote errors", st)
		}
	})
}

// TestMalformedReplies: every kind of bad reply is malformed, never a
// decision.
func TestMalformedReplies(t *testing.T) {
	replies := []string{
		`not json`,
		`{"decision": "deny"}`,
		`{"decision": {"action": "nuke"}}`,
		`{"decision": {"action": "deny", "reason": "typo"}}`,
		`{"request": {"model": "x"}}`,
		`{"decision": null} {}`,
		``,
	}
	e := newEnv(t)
	for i, reply := range replies {
		service := "broken-" + string(rune('a'+i))
		e.respond(t, service, hooks.HookBeforeToolCall, nil, reply)
		p, _, _ := e.client(t, remote.Config{Service: service, Timeout: callTimeout, Hooks: []hooks.Hook{hooks.HookBeforeToolCall}})
		dec, err := p.BeforeToolCall(t.Context(), toolCall())
		if dec != nil || !errors.Is(err, remote.ErrMalformedReply) {
			t.Errorf("reply %q: decision %+v, error %v; want a malformed-reply error", reply, dec, err)
		}
	}
}

// TestMicroErrorHeaders: an interceptor that answers with NATS micro error
// headers only (no body) is a remote error whose kind comes from the code.
func TestMicroErrorHeaders(t *testing.T) {
	e := newEnv(t)
	e.respond(t, "plain", hooks.HookBeforeToolCall, nats.Header{
		"Nats-Service-Error": []string{"rate limited"}, "Nats-Service-Error-Code": []string{"503"},
	}, "")
	p, _, _ := e.client(t, remote.Config{Service: "plain", Timeout: callTimeout, Hooks: []hooks.Hook{hooks.HookBeforeToolCall}})
	_, err := p.BeforeToolCall(t.Context(), toolCall())
	if be, ok := errors.AsType[*bub.Error](err); !ok || be.Kind != bub.KindTemporary || be.Message != "rate limited" {
		t.Errorf("error %v, want a temporary error %q", err, "rate limited")
	}
}

// traced records the deadline and trace context its calls arrive with.
type traced struct {
	mu       sync.Mutex
	deadline time.Time
	trace    string
}

func (*traced) Name() string { return "traced" }

type traceKey struct{}

func (p *traced) BeforeToolCall(ctx context.Context, _ hooks.BeforeToolCallInput) (*tools.Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deadline, _ = ctx.Deadline()
	p.trace, _ = ctx.Value(traceKey{}).(string)
	return nil, nil
}

// TestDeadlineAndTraceContext: the plugin behind the service runs with the
// caller's deadline (the earlier of the caller's and the timeout) and
// receives the trace context through the traceparent/tracestate headers.
func TestDeadlineAndTraceContext(t *testing.T) {
	e := newEnv(t)
	plugin := &traced{}
	svc, err := interceptor.Serve(t.Context(), e.serverNC, e.names, plugin,
		interceptor.WithTraceContext(func(ctx context.Context, tp, ts string) context.Context {
			return context.WithValue(ctx, traceKey{}, tp+"|"+ts)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	p, err := remote.New(e.clientNC, e.names, remote.Config{Service: "traced", Timeout: time.Hour}, nil,
		remote.WithTraceContext(func(context.Context) (string, string) { return tp, "vendor=x" }))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	if _, err := p.BeforeToolCall(ctx, toolCall()); err != nil {
		t.Fatal(err)
	}
	plugin.mu.Lock()
	defer plugin.mu.Unlock()
	if !plugin.deadline.Equal(want) {
		t.Errorf("plugin deadline %v, want the caller's %v", plugin.deadline, want)
	}
	if plugin.trace != tp+"|vendor=x" {
		t.Errorf("plugin trace context %q", plugin.trace)
	}
}

// TestCallerDeadlineWins: a caller deadline earlier than the timeout ends
// the call; that is the caller's cancellation, not the interceptor's
// failure, so no policy applies.
func TestCallerDeadlineWins(t *testing.T) {
	e := newEnv(t)
	e.serve(t, "slow", slowTool{})
	p, reg, _ := e.client(t, remote.Config{Service: "slow", Timeout: time.Hour, Failure: remote.FailClosed})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	begin := time.Now()
	_, dec, err := reg.BeforeToolCall(ctx, toolCall())
	if took := time.Since(begin); took > bound {
		t.Errorf("call took %v, want at most %v", took, bound)
	}
	if dec != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("decision %+v, error %v; want the caller's deadline error and no denial", dec, err)
	}
	if st := p.Stats(); st.Cancelled != 1 {
		t.Errorf("stats = %+v, want one cancelled", st)
	}
}
