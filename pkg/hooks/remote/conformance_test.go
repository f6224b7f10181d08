package remote_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/hookstest"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestConformance runs the agent-loop hook conformance suite with every
// wrapped plugin served by interceptor.Serve on a real NATS server and
// reached through a remote.Plugin that discovered its hooks: the same
// suite the registry passes with local plugins.
func TestConformance(t *testing.T) {
	s := natstest.Start(t)
	serverNC, clientNC := s.Conn(t), s.Conn(t)
	names := subjects.Default()
	var n atomic.Int64
	hookstest.Run(t, func(t *testing.T, p hooks.Plugin) hooks.Plugin {
		service := fmt.Sprintf("%s-%d", p.Name(), n.Add(1))
		svc, err := interceptor.Serve(t.Context(), serverNC, names, p, interceptor.WithName(service))
		if err != nil {
			t.Fatalf("serving %q: %v", p.Name(), err)
		}
		t.Cleanup(func() {
			if err := svc.Stop(t.Context()); err != nil {
				t.Errorf("stopping %q: %v", service, err)
			}
		})
		rp, err := remote.New(clientNC, names, remote.Config{Service: service}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := rp.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return rp
	})
}
