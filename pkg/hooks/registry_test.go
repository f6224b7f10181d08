package hooks_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

func TestRegisterValidation(t *testing.T) {
	r := hooks.New[*memStore, tapeCtx]()
	for _, tc := range []struct {
		p    hooks.Plugin
		want error
	}{
		{nil, hooks.ErrInvalidPlugin},
		{named(""), hooks.ErrInvalidPlugin},
		{named("builtin"), nil},
		{named("builtin"), hooks.ErrDuplicatePlugin},
		{named("user"), nil},
	} {
		if err := r.Register(tc.p); !errors.Is(err, tc.want) {
			t.Errorf("Register(%v) = %v, want %v", tc.p, err, tc.want)
		}
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(named("late")); !errors.Is(err, hooks.ErrFrozen) {
		t.Errorf("Register after Start = %v, want ErrFrozen", err)
	}
	if err := r.Start(t.Context()); !errors.Is(err, hooks.ErrFrozen) {
		t.Errorf("second Start = %v, want ErrFrozen", err)
	}

	closed := hooks.New[*memStore, tapeCtx]()
	if err := closed.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := closed.Register(named("late")); !errors.Is(err, hooks.ErrFrozen) {
		t.Errorf("Register after Close = %v, want ErrFrozen", err)
	}

	defer func() {
		if v := recover(); v == nil || !errors.Is(v.(error), hooks.ErrDuplicatePlugin) {
			t.Errorf("MustRegister of a duplicate recovered %v", v)
		}
	}()
	r2 := hooks.New[*memStore, tapeCtx]()
	r2.MustRegister(named("a"))
	r2.MustRegister(named("a"))
}

// lifecycle is a plugin with Start and Close that journals both.
type lifecycle struct {
	name     string
	j        *journal
	startErr func() error
	closeErr error
}

func (p *lifecycle) Name() string { return p.name }

func (p *lifecycle) Start(context.Context) error {
	p.j.add("start:" + p.name)
	if p.startErr != nil {
		return p.startErr()
	}
	return nil
}

func (p *lifecycle) Close(context.Context) error {
	p.j.add("close:" + p.name)
	return p.closeErr
}

// closeOnly holds a resource from construction: it has Close but no Start.
type closeOnly struct {
	name string
	j    *journal
}

func (p closeOnly) Name() string { return p.name }

func (p closeOnly) Close(context.Context) error {
	p.j.add("close:" + p.name)
	return nil
}

func TestLifecycleIsOrdered(t *testing.T) {
	var j journal
	r := newRegistry(t, nil,
		&lifecycle{name: "builtin", j: &j},
		closeOnly{name: "pool", j: &j},
		&lifecycle{name: "user", j: &j, closeErr: errors.New("flush failed")},
	)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := r.Close(t.Context())
	if err == nil || !strings.Contains(err.Error(), `closing plugin "user": flush failed`) {
		t.Errorf("Close = %v, want user's failure", err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	equal(t, "calls", j.get(), []string{"start:builtin", "start:user", "close:user", "close:pool", "close:builtin"})
}

func TestLifecycleToleratesPartialStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func() error
	}{
		{"error", func() error { return errors.New("no database") }},
		{"panic", func() error { panic("start bug") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j journal
			r := newRegistry(t, nil,
				&lifecycle{name: "a", j: &j},
				closeOnly{name: "b", j: &j},
				&lifecycle{name: "broken", j: &j, startErr: tc.fail},
				&lifecycle{name: "never", j: &j},
			)
			err := r.Start(t.Context())
			if err == nil || !strings.Contains(err.Error(), `starting plugin "broken"`) {
				t.Fatalf("Start = %v, want broken's failure", err)
			}
			if err := r.Close(t.Context()); err != nil {
				t.Errorf("Close after a failed start = %v", err)
			}
			equal(t, "calls", j.get(), []string{"start:a", "start:broken", "close:b", "close:a"})
		})
	}
}

func TestCloseWithoutStartClosesNothing(t *testing.T) {
	var j journal
	r := newRegistry(t, nil, &lifecycle{name: "a", j: &j})
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	equal(t, "calls", j.get(), []string(nil))
}

// remote is a remote plugin: it implements every agent-loop hook type it
// could forward, but its service serves only before_tool_call.
type remote struct{ fake }

func (r *remote) Describe() hooks.Description {
	return hooks.Description{Remote: true, Service: "policy", Detail: "timeout 2s, fail-closed"}
}

func (r *remote) ServesHook(h hooks.Hook) bool { return h == hooks.HookBeforeToolCall }

func TestReport(t *testing.T) {
	if got := hooks.New[*memStore, tapeCtx]().Report().String(); got != "(no hook implementations)\n" {
		t.Errorf("empty report = %q", got)
	}
	r := newRegistry(t, nil,
		&fake{
			name:           "builtin",
			resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "", false, nil },
			onboardConfig:  func(hooks.OnboardConfigInput) (map[string]any, error) { return nil, nil },
			beforeTool:     func(hooks.BeforeToolCallInput) (*tools.Decision, error) { return nil, nil },
			onError:        func(hooks.OnErrorInput) error { return nil },
			tapeStore:      func() (*memStore, bool, error) { return nil, false, nil },
		},
		&remote{fake{name: "policy"}},
		&fake{
			name:           "web",
			resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) { return "", false, nil },
			onboardConfig:  func(hooks.OnboardConfigInput) (map[string]any, error) { return nil, nil },
		},
	)
	rep := r.Report()
	want := `before_tool_call [chained, in run order; a decision stops the chain; failures isolated]: policy (remote: policy: timeout 2s, fail-closed), builtin
on_error [observer, in run order; all run; failures isolated]: builtin
onboard_config [broadcast, in registration order; all run; startup only]: builtin, web
provide_tape_store [firstresult, in run order; the first that answers wins; once per runtime scope]: builtin
resolve_session [firstresult, in run order; the first that answers wins]: web, builtin
`
	equal(t, "report", rep.String(), want)
	equal(t, "remote flag", rep[0].Impls[0].Description.Remote, true)
	equal(t, "kind", rep[4].Kind, hooks.KindFirstResult)
}

// Dispatch is lock-free and may run while plugins register (run with -race).
func TestConcurrentDispatchAndRegistration(t *testing.T) {
	r := hooks.New[*memStore, tapeCtx]()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if _, err := r.ResolveSession(t.Context(), hooks.ResolveSessionInput{Message: &envelope.Envelope{}}); err != nil {
					t.Error(err)
					return
				}
				_ = r.Report()
			}
		})
	}
	for i := range 50 {
		r.MustRegister(&fake{name: string(rune('a'+i%26)) + strings.Repeat("x", i/26), resolveSession: func(hooks.ResolveSessionInput) (string, bool, error) {
			return "s", true, nil
		}})
	}
	wg.Wait()
	equal(t, "resolvers", len(r.Report()[0].Impls), 50)
}

// scoped is an admit_message implementation that may decide only the
// messages of one channel.
type scoped struct {
	fake
	channel string
}

func (s *scoped) MayAdmit(m *envelope.Envelope) bool { return m.Channel == s.channel }

func TestMayAdmit(t *testing.T) {
	admit := func(hooks.AdmitMessageInput) (hooks.AdmitDecision, bool, error) {
		return hooks.AdmitDecision{Action: hooks.AdmitSteer}, true, nil
	}
	cli, http := &envelope.Envelope{Channel: "cli"}, &envelope.Envelope{Channel: "http"}
	cliOnly := &scoped{fake: fake{name: "builtin", admitMessage: admit}, channel: "cli"}
	for _, tc := range []struct {
		name      string
		plugins   []hooks.Plugin
		cli, http bool
	}{
		{"no admit_message", []hooks.Plugin{&fake{name: "other", onError: func(hooks.OnErrorInput) error { return nil }}}, false, false},
		{"scoped to cli", []hooks.Plugin{cliOnly}, true, false},
		{"and an unscoped one", []hooks.Plugin{cliOnly, &fake{name: "policy", admitMessage: admit}}, true, true},
	} {
		r := newRegistry(t, nil, tc.plugins...)
		equal(t, tc.name+": cli", r.MayAdmit(cli), tc.cli)
		equal(t, tc.name+": http", r.MayAdmit(http), tc.http)
	}
}
