package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/internal/gateway"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/channels/telegram"
	"github.com/bubbus/bub/pkg/channels/telegram/telegramtest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/subjects"
)

// TestFloodWaitIsHonouredNotDeadLettered (failed before the fix): when
// the Bot API answers sendMessage with 429 and a retry_after above maxRetryAfter (one minute,
// pkg/channels/telegram/api.go:retryAfter), telegram.Channel.Send returns
// the *APIError at once without waiting. The gateway then redelivers on
// its own schedule (deliver.go:retry, RetryDelay doubled per delivery),
// which knows nothing of retry_after: every redelivery hits Telegram
// before the flood wait ends, gets 429 again, and after GatewayMaxDeliver
// deliveries the reply is dead-lettered as send_failed although Telegram
// only asked to wait. With the defaults (1s doubled, 10 deliveries) any
// retry_after above about four minutes loses the reply to the user; here
// (10ms, 3 deliveries) a retry_after of 61s loses it in milliseconds:
//
//	delivery 1: sendMessage -> 429 retry_after 61 -> NakWithDelay(10ms)
//	delivery 2: sendMessage -> 429 (too early)    -> NakWithDelay(20ms)
//	delivery 3: sendMessage -> 429 (too early)    -> dead letter send_failed
//
// Expected: the redelivery waits at least retry_after (the Sender's error
// carries it: channels.RetryAfter), so no call reaches Telegram before
// the wait ends and the reply is not dead-lettered.
func TestFloodWaitIsHonouredNotDeadLettered(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayMaxDeliver: 3})
	fake := telegramtest.NewServer(t)
	for range 3 {
		fake.FailNext("sendMessage", telegramtest.Failure{Code: http.StatusTooManyRequests, Description: "Too Many Requests: retry after 61", RetryAfter: 61})
	}
	p := func(_ context.Context, h hooks.MessageHandler) ([]hooks.Channel, error) {
		ch, err := telegram.New(telegram.Config{Token: fake.Token(), APIBase: fake.URL(), PollTimeout: time.Second}, h, nil)
		if err != nil {
			return nil, err
		}
		return []hooks.Channel{ch}, nil
	}
	e.start(t, gateway.Options{Channels: p, Enabled: telegram.Name})
	out := &envelope.Envelope{ID: "out-flood", Content: "hello", Channel: telegram.Name, ChatID: "42", SessionID: "telegram:42", OutputChannel: telegram.Name}
	ev, err := events.New(events.TypeEnvelopeOutbound, events.Attrs{ID: out.ID, Source: events.Source("worker", "test"), SessionID: out.SessionID}, out)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.ToMsg(e.names.Outbound(telegram.Name, out.SessionID), ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	sendCalls := func() int {
		n := 0
		for _, c := range fake.Calls() {
			if c.Method == "sendMessage" {
				n++
			}
		}
		return n
	}
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return sendCalls() >= 1, "no sendMessage call"
	})
	time.Sleep(2 * time.Second) // far less than the 61s Telegram asked for
	if n := sendCalls(); n != 1 {
		t.Errorf("sendMessage called %d times within 2s of a 429 with retry_after 61s, want 1", n)
	}
	st, err := e.js.Stream(t.Context(), e.names.DLQStream())
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := st.GetLastMsgForSubject(t.Context(), e.names.DLQ(dlq.ReasonSendFailed)); err == nil {
		t.Fatalf("the reply was dead-lettered while Telegram only asked to wait 61s: %s", raw.Header.Get(subjects.HeaderDLQError))
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}
}
