package gateway_test

// Delivery to Telegram on rare answers: a flood wait longer than the
// channel waits out itself, a long reply whose later part fails. Each
// test failed before its fix.

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
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
	e.publishEnvelope(t, out, "")
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

// TestLongReplyIsNotSentTwiceAfterAFailedChunk (failed before the fix):
// a reply longer than
// Telegram's 4096 characters is split by telegram.Channel.Send into
// several sendMessage calls (pkg/channels/telegram/send.go:sendText). When
// a later chunk fails (here a 502 from the Bot API on the second
// sendMessage, a transient failure) Send returns an error although the
// first chunk was already accepted by Telegram. The gateway treats the
// whole envelope as not sent (internal/gateway/deliver.go handle: Send
// error -> Delete the claim -> retry), so the redelivery calls Send again
// from the start and the first chunk reaches the user a second time:
//
//	delivery 1: sendMessage(chunk 1) ok, sendMessage(chunk 2) 502 -> Nak
//	delivery 2: sendMessage(chunk 1) ok (DUPLICATE), sendMessage(chunk 2) ok
//
// Expected (the project's "a reply is delivered once"): every chunk is
// sent exactly once; a retry resumes after the chunks already accepted.
func TestLongReplyIsNotSentTwiceAfterAFailedChunk(t *testing.T) {
	e := setup(t, natsx.Topology{})
	fake := telegramtest.NewServer(t)
	target, err := url.Parse(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	// A proxy in front of the fake Bot API answers the second sendMessage
	// call with a 502, as the real API does under load.
	var sends atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // the poll's cancelled getUpdates at shutdown
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/sendMessage") && sends.Add(1) == 2 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":502,"description":"Bad Gateway"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	p := func(_ context.Context, h hooks.MessageHandler) ([]hooks.Channel, error) {
		ch, err := telegram.New(telegram.Config{Token: fake.Token(), APIBase: proxy.URL, PollTimeout: time.Second}, h, nil)
		if err != nil {
			return nil, err
		}
		return []hooks.Channel{ch}, nil
	}
	e.start(t, gateway.Options{Channels: p, Enabled: telegram.Name})

	// A reply of 5000 characters: two chunks, 4096 + 904.
	text := strings.Repeat("a", 5000)
	out := &envelope.Envelope{ID: "out-long", Content: text, Channel: telegram.Name, ChatID: "42", SessionID: "telegram:42", OutputChannel: telegram.Name}
	e.publishEnvelope(t, out, "")

	natstest.Eventually(t, 15*time.Second, func() (bool, string) {
		ok, why := e.settled(t, telegram.Name)
		var got int
		for _, m := range fake.Sent() {
			got += len(m.Text)
		}
		return ok && got >= len(text), why
	})
	sent := fake.Sent()
	var total int
	for _, m := range sent {
		total += len(m.Text)
	}
	if len(sent) != 2 || total != len(text) {
		lens := make([]int, len(sent))
		for i, m := range sent {
			lens[i] = len(m.Text)
		}
		t.Fatalf("the chat received %d messages of lengths %v (%d characters) for a reply of %d characters: want its 2 chunks once each", len(sent), lens, total, len(text))
	}
}
