package workercmd

import (
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// noHooks is a plugin that is not a remote interceptor.
type noHooks struct{}

func (noHooks) Name() string { return "local" }

// TestInterceptorCallsReadsRemotePlugins: the counts telemetry observes
// are the remote interceptors' own, by outcome name, and plugins that are
// not remote interceptors contribute nothing.
func TestInterceptorCallsReadsRemotePlugins(t *testing.T) {
	if interceptorCalls([]hooks.Plugin{noHooks{}}) != nil {
		t.Fatal("a function to read from without any remote interceptor")
	}
	nc := natstest.Start(t).Conn(t)
	p, err := remote.New(nc, subjects.Default(), remote.Config{Service: "guard", Hooks: []hooks.Hook{hooks.HookBeforeToolCall}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody serves guard: one call, answered by nobody (fail-open).
	if _, err := p.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: tools.Call{Tool: "bash"}, State: bub.NewState(nil)}); err == nil {
		t.Fatal("a call nobody serves succeeded")
	}
	read := interceptorCalls([]hooks.Plugin{noHooks{}, p})
	if read == nil {
		t.Fatal("no function to read the remote interceptor's calls from")
	}
	got := read()
	if len(got) != 1 || got[0].Service != "guard" {
		t.Fatalf("calls %+v, want one entry for service guard", got)
	}
	want := map[string]uint64{"ok": 0, "no_responders": 1, "timeout": 0, "malformed": 0, "remote_error": 0, "transport": 0, "cancelled": 0}
	if len(got[0].ByOutcome) != len(want) {
		t.Errorf("outcomes %v, want %v", got[0].ByOutcome, want)
	}
	for o, n := range want {
		if got[0].ByOutcome[o] != n {
			t.Errorf("outcome %s = %d, want %d (all: %v)", o, got[0].ByOutcome[o], n, got[0].ByOutcome)
		}
	}
}
