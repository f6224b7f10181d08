package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
	"github.com/bubbus/bub/pkg/tools"
)

// TestPolicyServesAndDrains runs the command against an embedded NATS
// server, calls it like a worker does, and stops it like SIGTERM does.
func TestPolicyServesAndDrains(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	env := map[string]string{"POLICY_DENY_TOOLS": "bash, fs.write", "BUB_NATS_URL": s.URL, "POLICY_CONCURRENCY": "2"}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--name", "guard", "--model", "openai:small", "--model-from", "openai:big"}, func(k string) string { return env[k] }, io.Discard)
	}()

	p := discover(t, s, "guard")
	// POLICY_CONCURRENCY=2: two instances answer discovery once both
	// are up (the first may answer before the second is added).
	for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(p.Describe().Detail, "2 instances"); p = discover(t, s, "guard") {
		if time.Now().After(deadline) {
			t.Fatalf("discovery: %s, want 2 instances", p.Describe().Detail)
		}
	}
	for _, h := range []hooks.Hook{hooks.HookBeforeToolCall, hooks.HookBeforeLLMCall} {
		if !p.ServesHook(h) {
			t.Errorf("%s not served", h)
		}
	}
	for tool, denied := range map[string]bool{"bash": true, "fs_write": true, "fs_read": false} {
		d, err := p.BeforeToolCall(t.Context(), hooks.BeforeToolCallInput{Call: tools.Call{Tool: tool}})
		if err != nil {
			t.Fatal(err)
		}
		if got := d != nil && d.Action == tools.ActionDeny && strings.Contains(d.Message, tool); got != denied {
			t.Errorf("%s: decision %+v, want denied=%v", tool, d, denied)
		}
	}
	for model, want := range map[string]string{"openai:big": "openai:small", "openai:other": "openai:other"} {
		r, _, err := p.BeforeLLMCall(t.Context(), hooks.BeforeLLMCallInput{Request: llm.Request{Model: model}})
		if err != nil {
			t.Fatal(err)
		}
		got := model
		if r != nil {
			got = r.Model
		}
		if got != want {
			t.Errorf("%s: model %q after the call, want %q", model, got, want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(shutdownGrace):
		t.Fatal("policy did not drain")
	}
}

// discover waits until service answers discovery and returns a client.
func discover(t *testing.T, s *natstest.Server, service string) *remote.Plugin {
	t.Helper()
	nc := s.Conn(t)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := remote.New(nc, subjects.Default(), remote.Config{Service: service, Failure: remote.FailClosed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Start(t.Context())
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not discovered: %v", service, err)
		}
		<-tick.C
	}
}

func TestPolicyNeedsARule(t *testing.T) {
	err := run(t.Context(), nil, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nothing to enforce") {
		t.Errorf("run without rules: %v", err)
	}
}
