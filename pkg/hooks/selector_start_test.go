package hooks

import (
	"context"
	"testing"

	"github.com/bubbus/bub/pkg/envelope"
)

// learning serves resolve_session only once it has started, like a remote
// interceptor that discovers its service's hooks in Start.
type learning struct{ started bool }

func (l *learning) Name() string                { return "learning" }
func (l *learning) Start(context.Context) error { l.started = true; return nil }
func (l *learning) ServesHook(h Hook) bool      { return l.started && h == HookResolveSession }
func (l *learning) ResolveSession(context.Context, ResolveSessionInput) (string, bool, error) {
	return "learned", true, nil
}

func TestStartReevaluatesHookSelectors(t *testing.T) {
	r := New[any, any]()
	r.MustRegister(&learning{})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := r.ResolveSession(context.Background(), ResolveSessionInput{Message: &envelope.Envelope{ID: "in-1", Content: "hi"}})
	if err != nil || got != "learned" {
		t.Fatalf("ResolveSession = %q, %v; want the hook the plugin serves after Start", got, err)
	}
}
