package stack_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tape"
)

// TestTurnLargerThanMaxPayload: on a server that takes messages of at
// most 64 KiB, a turn whose step would publish a larger chat.finished
// event (a 34 KiB message, a 34 KiB reply and the system prompt) fails at
// once: the model is called once, the turn is answered with one error
// reply that names max_payload, and its inbound envelope is dead-lettered
// as payload_too_large after that one delivery, not redelivered until
// its deliveries run out. The session goes on: its next turn is answered
// without waiting for the tape (no tape.stale), and the tape holds that
// turn's messages. Replayed from the dead letters once it fits, the turn
// runs again and is answered.
func TestTurnLargerThanMaxPayload(t *testing.T) {
	big := strings.Repeat("r", 34<<10)
	c := stacktest.Start(t, stacktest.Options{
		MaxPayload: 64 << 10,
		Script:     fakellm.Script{Steps: []fakellm.Step{{Text: big}, {Text: "small reply"}, {Text: "replayed"}}},
	})
	names := c.Conn.Names
	var stale atomic.Int64
	sub, err := c.Conn.NC.Subscribe(names.EventsOfType(events.SubjectName(events.TypeTapeStale)), func(*nats.Msg) { stale.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	const session = "too-large"
	start := time.Now()
	outs := c.Turn(t, &envelope.Envelope{ID: "big-1", Content: strings.Repeat("m", 34<<10), Channel: "test", ChatID: "c", SessionID: session})
	if len(outs) != 1 || outs[0].Kind != envelope.KindError || !strings.Contains(outs[0].Content, "max_payload") {
		for _, o := range outs {
			t.Logf("reply %s kind %s: %.200s", o.ID, o.Kind, o.Content)
		}
		t.Fatalf("%d replies to the large turn, want one error reply naming max_payload", len(outs))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the large turn was answered after %v, want at once (no redelivery)", d)
	}
	var letters []dlq.Letter
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		letters, err = dlq.List(t.Context(), c.Conn.JS, names, dlq.ReasonPayloadTooLarge)
		return err == nil && len(letters) == 1, fmt.Sprintf("%d payload_too_large dead letters (%v), want 1", len(letters), err)
	})
	dead := letters[0]
	if dead.EventID != "big-1" || dead.Subject != names.Inbound("test") {
		t.Errorf("dead letter of %q on %s, want the large turn's envelope big-1 on %s", dead.EventID, dead.Subject, names.Inbound("test"))
	}
	if !strings.Contains(dead.Error, "chat.finished") || !strings.Contains(dead.Error, "max_payload") {
		t.Errorf("dead letter error %q, want the chat.finished event and max_payload named", dead.Error)
	}
	if n := len(c.LLM.Requests()); n != 1 {
		t.Errorf("%d model calls for the large turn, want 1 (a turn that cannot fit is not run again)", n)
	}

	start = time.Now()
	outs = c.Turn(t, &envelope.Envelope{ID: "small-1", Content: "hello", Channel: "test", ChatID: "c", SessionID: session})
	if len(outs) != 1 || outs[0].Content != "small reply" {
		t.Fatalf("replies to the next turn: %+v, want the model's small reply", outs)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the next turn took %v, want no wait for the tape", d)
	}
	if n := stale.Load(); n != 0 {
		t.Errorf("%d tape.stale events, want 0", n)
	}
	texts := tapeContents(t, c, session, tape.KindMessage)
	if len(texts) < 2 || !strings.HasSuffix(texts[len(texts)-2], "\nhello") || texts[len(texts)-1] != "small reply" {
		t.Errorf("the tape's messages end with %q, want the next turn's hello and small reply", texts)
	}

	// Replayed once it fits (here: the model's next reply is small), the
	// turn runs again and is answered.
	await := c.Gateway.Expect("big-1")
	if err := dlq.Replay(t.Context(), c.Conn.JS, names, dead); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), stacktest.Wait)
	defer cancel()
	outs, err = await(ctx)
	if err != nil || len(outs) != 1 || outs[0].Content != "replayed" {
		t.Fatalf("replies to the replayed turn: %+v (%v), want the model's reply", outs, err)
	}
}
