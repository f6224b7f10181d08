package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/proctest"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/providers"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/taperec"
	"github.com/bubbus/bub/pkg/tools"
)

// The run and session of every test run.
const (
	testRunID   = "run-test"
	testSession = "session-test"
)

// waitLimit bounds every wait of a test on a condition.
const waitLimit = 10 * time.Second

// testTape is the run's tape in tests: a tape.Tape over a fork of a memory
// store. Its record method is a bus sink applying every emitted event
// through the recorder's mapping (package taperec), as the worker's local
// TapeRecorder does, so later steps read what earlier steps recorded.
type testTape struct {
	fork *tape.Fork
	tape tape.Tape

	mu  sync.Mutex
	err error // the first failure to record an event
}

var _ agent.Tape = (*testTape)(nil)

func newTestTape() *testTape {
	fork := tape.NewFork(tape.NewMemoryStore())
	return &testTape{fork: fork, tape: tape.New(fork, testSession, tape.Context{})}
}

func (tt *testTape) ReadMessages(ctx context.Context) ([]llm.Message, error) {
	return tt.tape.ReadMessages(ctx)
}

func (tt *testTape) EnsureBootstrapAnchor(ctx context.Context) error {
	return tt.tape.EnsureBootstrapAnchor(ctx)
}

func (tt *testTape) Handoff(ctx context.Context, name string, state map[string]any) error {
	_, err := tt.tape.Handoff(ctx, name, state)
	return err
}

// record is the test's TapeRecorder (a bus sink).
func (tt *testTape) record(ctx context.Context, ev events.Event) {
	ce, err := events.ToCloudEvent(ev, events.Attrs{Source: events.Source("agent-test", "0")})
	if errors.Is(err, events.ErrUnregistered) {
		return
	}
	if err == nil {
		var payload any
		if payload, err = events.DecodePayload(ce); err == nil {
			if b := taperec.Map(payload, testRunID, ce.Time()); len(b.Entries) > 0 {
				_, err = tt.fork.Append(ctx, testSession, b.Entries)
			}
		}
	}
	if err != nil {
		tt.mu.Lock()
		tt.err = errors.Join(tt.err, err)
		tt.mu.Unlock()
	}
}

// entries returns every entry of the session tape.
func (tt *testTape) entries(t testing.TB) []tape.Entry {
	t.Helper()
	es, err := tt.fork.Fetch(context.Background(), testSession, tape.All())
	if err != nil {
		t.Fatalf("fetching the tape: %v", err)
	}
	return es
}

// kinds returns the entries' kinds, events as "event:<name>".
func kinds(es []tape.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
		if e.Kind == tape.KindEvent || e.Kind == tape.KindAnchor {
			out[i] += ":" + e.Payload["name"].(string)
		}
	}
	return out
}

// eventLog is a general handler (On[events.Event]) that keeps every event
// it sees. Events are pointers, so after a run each holds its final value.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

func (l *eventLog) handle(_ context.Context, ev events.Event) error {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
	return nil
}

func (l *eventLog) all() []events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]events.Event(nil), l.evs...)
}

// labels names the events in order, with the detail that tells them
// apart: MessagesPending(start|end), StepFinished(<status>),
// RunFinished(<status>), CommandFinished(<status>).
func (l *eventLog) labels() []string {
	var out []string
	for _, ev := range l.all() {
		out = append(out, label(ev))
	}
	return out
}

func label(ev events.Event) string {
	name := reflect.TypeOf(ev).Elem().Name()
	switch e := ev.(type) {
	case *events.MessagesPending:
		if e.AtStepEnd {
			return name + "(end)"
		}
		return name + "(start)"
	case *events.StepFinished:
		return name + "(" + e.Status + ")"
	case *events.RunFinished:
		return name + "(" + e.Status + ")"
	case *events.CommandFinished:
		return name + "(" + e.Status + ")"
	}
	return name
}

// eventsOf returns the logged events of type T, in order.
func eventsOf[T events.Event](l *eventLog) []T {
	var out []T
	for _, ev := range l.all() {
		if e, ok := ev.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

// env is one agent with real parts around it: the fake LLM server behind
// the real router (or the echo model), a tools.Registry, a hooks registry
// wired onto the run's bus by agent.Plugins, and a memory tape.
type env struct {
	t        *testing.T
	srv      *fakellm.Server // nil with the echo model
	srvBase  string          // the fake server's OpenAI base URL
	models   agent.Models
	tools    *tools.Registry
	hooks    *hooks.Registry[tape.Store, tape.Context]
	hookLogs *proctest.Buffer
	settings agent.Settings
	system   agent.SystemPrompt
	steer    agent.Steering
	early    []func(*events.Bus) // registrations before the adapter's
	bus      *events.Bus
	tape     *testTape
	log      *eventLog
	state    *bub.State

	mu     sync.Mutex
	deltas []llm.Delta
}

type option func(*env)

func withSettings(s agent.Settings) option { return func(e *env) { e.settings = s } }

func withTools(ts ...tools.Tool) option {
	return func(e *env) {
		for _, t := range ts {
			if err := e.tools.Register(t); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

func withPlugins(ps ...hooks.Plugin) option {
	return func(e *env) {
		for _, p := range ps {
			if err := e.hooks.Register(p); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

func withSteering(s agent.Steering) option { return func(e *env) { e.steer = s } }

func withSystem(s agent.SystemPrompt) option { return func(e *env) { e.system = s } }

// withEarlyHandler registers handlers on the bus before the AgentPlugins
// adapter (and after the event log).
func withEarlyHandler(f func(*events.Bus)) option {
	return func(e *env) { e.early = append(e.early, f) }
}

// echoModel replaces the fake server with the echo model.
func echoModel() option {
	return func(e *env) {
		r, err := providers.NewRouter(llm.Config{})
		if err != nil {
			e.t.Fatal(err)
		}
		e.srv, e.models, e.settings.Model = nil, r, "echo:echo"
	}
}

// newEnv serves steps from the fake LLM (model "openai:fake") and builds
// the rest. The event log is the first handler on the bus, the
// AgentPlugins adapter the second; the tape recorder is a sink.
func newEnv(t *testing.T, steps []fakellm.Step, opts ...option) *env {
	t.Helper()
	srv, base := fakellm.Start(t, fakellm.Script{Steps: steps})
	router, err := providers.NewRouter(llm.Config{Model: "openai:fake", APIBase: base, APIKey: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		t:        t,
		srv:      srv,
		srvBase:  base,
		models:   router,
		tools:    &tools.Registry{},
		hookLogs: &proctest.Buffer{},
		settings: agent.Settings{Model: "openai:fake"},
		bus:      &events.Bus{},
		tape:     newTestTape(),
		log:      &eventLog{},
		state:    bub.NewState(nil),
	}
	e.hooks = hooks.New[tape.Store, tape.Context](hooks.WithLogger(slog.New(slog.NewTextHandler(e.hookLogs, nil))))
	for _, o := range opts {
		o(e)
	}
	events.On(e.bus, e.log.handle)
	for _, f := range e.early {
		f(e.bus)
	}
	agent.Plugins(e.bus, e.hooks, e.steer)
	e.bus.OnEmitted(e.tape.record)
	t.Cleanup(func() {
		e.tape.mu.Lock()
		defer e.tape.mu.Unlock()
		if e.tape.err != nil {
			t.Errorf("recording the run's events: %v", e.tape.err)
		}
	})
	return e
}

// newRun returns the run of prompt; mods change it.
func (e *env) newRun(prompt string, mods ...func(*agent.Run)) agent.Run {
	r := agent.Run{
		RunID:     testRunID,
		SessionID: testSession,
		Prompt:    llm.Text(prompt),
		State:     e.state,
		Tape:      e.tape,
		Bus:       e.bus,
		OnDelta: func(d agent.Delta) {
			e.mu.Lock()
			e.deltas = append(e.deltas, d.Delta)
			e.mu.Unlock()
		},
	}
	for _, m := range mods {
		m(&r)
	}
	return r
}

func (e *env) agent() *agent.Agent {
	return agent.New(e.models, e.tools, e.settings, e.system, nil)
}

// run runs prompt with a deadline.
func (e *env) run(prompt string, mods ...func(*agent.Run)) (agent.Output, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return e.agent().Run(ctx, e.newRun(prompt, mods...))
}

// mustRun runs prompt and fails the test on error.
func (e *env) mustRun(prompt string, mods ...func(*agent.Run)) agent.Output {
	e.t.Helper()
	out, err := e.run(prompt, mods...)
	if err != nil {
		e.t.Fatalf("run %q: %v", prompt, err)
	}
	return out
}

// requests returns the chat requests the fake LLM received.
func (e *env) requests() []fakellm.Request { return e.srv.Requests() }

// text returns the concatenated text deltas.
func (e *env) text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, d := range e.deltas {
		if d.Kind == llm.DeltaText {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// toolMessages returns the tool messages of a request, decoded: JSON
// results as values, other text as a string.
func toolMessages(req fakellm.Request) []any {
	var out []any
	for _, m := range req.Messages {
		if m.Role != llm.RoleTool {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(m.Content.PlainText()), &v); err != nil {
			v = m.Content.PlainText()
		}
		out = append(out, v)
	}
	return out
}

// userTexts returns the texts of a request's user messages.
func userTexts(req fakellm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			out = append(out, m.Content.PlainText())
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Test tools.

// stringParams is an object schema with required string properties.
func stringParams(names ...string) map[string]any {
	props := map[string]any{}
	for _, n := range names {
		props[n] = map[string]any{"type": "string"}
	}
	req := make([]any, len(names))
	for i, n := range names {
		req[i] = n
	}
	return map[string]any{"type": "object", "properties": props, "required": req}
}

func tool(name string, params map[string]any, h tools.Handler) tools.Tool {
	return tools.Tool{Name: name, Description: "test tool " + name, Parameters: params, Handler: h}
}

// upperTool returns its "text" argument upper-cased and counts its calls.
func upperTool(calls *countCalls) tools.Tool {
	return tool("text.upper", stringParams("text"), func(_ context.Context, _ *tools.Context, args map[string]any) (any, error) {
		calls.add(args)
		return strings.ToUpper(args["text"].(string)), nil
	})
}

// countCalls records the arguments of a tool's calls.
type countCalls struct {
	mu   sync.Mutex
	args []map[string]any
}

func (c *countCalls) add(args map[string]any) {
	c.mu.Lock()
	c.args = append(c.args, args)
	c.mu.Unlock()
}

func (c *countCalls) get() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.args...)
}

// call is a scripted tool call with JSON object arguments.
func call(name, args string) fakellm.ToolCall {
	return fakellm.ToolCall{Name: name, Arguments: json.RawMessage(args)}
}

// rawArgs is a scripted tool call whose argument text is sent verbatim.
func rawArgs(name, text string) fakellm.ToolCall {
	b, _ := json.Marshal(text)
	return fakellm.ToolCall{Name: name, Arguments: b}
}

// ---------------------------------------------------------------------------
// Test plugins: one hook each.

type beforeLLM struct {
	name string
	fn   func(context.Context, hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error)
}

func (p beforeLLM) Name() string { return p.name }
func (p beforeLLM) BeforeLLMCall(ctx context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	return p.fn(ctx, in)
}

type afterLLM struct {
	name string
	fn   func(context.Context, hooks.AfterLLMCallInput) error
}

func (p afterLLM) Name() string { return p.name }
func (p afterLLM) AfterLLMCall(ctx context.Context, in hooks.AfterLLMCallInput) error {
	return p.fn(ctx, in)
}

type beforeTool struct {
	name string
	fn   func(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error)
}

func (p beforeTool) Name() string { return p.name }
func (p beforeTool) BeforeToolCall(ctx context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return p.fn(ctx, in)
}

type afterTool struct {
	name string
	fn   func(context.Context, hooks.AfterToolCallInput) error
}

func (p afterTool) Name() string { return p.name }
func (p afterTool) AfterToolCall(ctx context.Context, in hooks.AfterToolCallInput) error {
	return p.fn(ctx, in)
}

type continuer struct {
	name string
	fn   func(context.Context, hooks.ContinuePromptInput) (string, bool, error)
}

func (p continuer) Name() string { return p.name }
func (p continuer) ContinuePrompt(ctx context.Context, in hooks.ContinuePromptInput) (string, bool, error) {
	return p.fn(ctx, in)
}

// steerQueue is a steering inbox: each Drain returns the next batch.
type steerQueue struct {
	mu      sync.Mutex
	batches [][]llm.Content
	drains  int
}

func (s *steerQueue) Drain(context.Context) ([]llm.Content, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drains++
	if len(s.batches) == 0 {
		return nil, nil
	}
	b := s.batches[0]
	s.batches = s.batches[1:]
	return b, nil
}

// trace records the order in which plugins ran.
type trace struct {
	mu    sync.Mutex
	names []string
}

func (tr *trace) add(name string) {
	tr.mu.Lock()
	tr.names = append(tr.names, name)
	tr.mu.Unlock()
}

func (tr *trace) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.names...)
}
