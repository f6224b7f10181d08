package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tape"
)

// queue is a steering inbox holding envelopes until drained.
type queue []*envelope.Envelope

func (q *queue) Drain(context.Context) ([]*envelope.Envelope, error) {
	out := *q
	*q = nil
	return out, nil
}

// A steered message is built like any other prompt, as in Bub: the
// builtin's build_prompt gives it its context line, date line and media.
func TestSteeringMessagesAreBuiltPrompts(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	bp := builtin.New(builtin.Options{Now: func() time.Time { return now }})
	reg := hooks.New[tape.Store, tape.Context]()
	if err := reg.Register(bp); err != nil {
		t.Fatal(err)
	}
	inbox := &queue{{
		ID: "m2", SessionID: "http:c1", Channel: "http", ChatID: "c1", Content: "steer me",
		Media: []envelope.Media{{Type: "image", MimeType: "image/png", URL: "https://example.com/kiwi.png"}},
	}}
	steer := steeringPrompts{inbox: inbox, reg: reg, session: "http:c1", state: bub.NewState(nil)}
	got, err := steer.Drain(t.Context())
	if err != nil || len(got) != 1 {
		t.Fatalf("Drain = %v, %v; want one prompt", got, err)
	}
	text := got[0].PlainText()
	for _, want := range []string{"channel=$http", "chat_id=c1", "---Date: 2026-12-01T13:00:00+00:00---\nsteer me"} {
		if !strings.Contains(text, want) {
			t.Errorf("steered prompt %q lacks %q", text, want)
		}
	}
	if len(got[0].Parts) != 2 || got[0].Parts[1].ImageURL == nil || got[0].Parts[1].ImageURL.URL != "https://example.com/kiwi.png" {
		t.Errorf("steered prompt parts = %+v, want the text and the image", got[0].Parts)
	}
}
