package gateway_test

// Delivery on rare paths: a flood wait longer than the channel waits out
// itself, a long reply whose later part fails, a held reply while the
// lane sends another for long, a reply another gateway's live claim
// holds, failed sends across a restart. Each test failed before its fix.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
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

// TestHeldReplyIsKeptAliveWhileTheLaneSendsAnother (failed before the
// fix): the held messages of a lane got their in-progress acks only from
// a ticker of (*lane).run's select, so while the lane is blocked in a
// Send of another session's reply (a send longer than the ack wait is
// supported: the lease keeps *that* message alive; Telegram's Send waits
// out a 429 of up to a minute against a 30s default ack wait) nobody
// keeps the held ones alive:
//
//	out-1 (session a) fails   -> held in the lane, due in 1s
//	out-b (session b) Send blocks 1.5s (5 ack waits)
//	  300ms: out-1 not acked -> redelivered (delivery 2), queued in l.in
//	  600ms: redelivered again (delivery 3 = GatewayMaxDeliver)
//	  900ms: max-deliveries advisory -> dlq watcher dead-letters out-1 as
//	         max_delivered and deletes it from the stream
//	out-b returns; the lane retries its held out-1 and sends it
//
// So a reply the user received is also dead-lettered (a replay of the
// dead letter sends it twice), and the redelivered copies pile up in the
// held queue behind the original (had the original then hit its last
// try, a copy would have been sent again after the dead letter, after
// the session's later replies). Expected (doc.go: the held replies are
// "kept alive by in-progress acks"): no redelivery of the held reply, no
// dead letter.
func TestHeldReplyIsKeptAliveWhileTheLaneSendsAnother(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayAckWait: 300 * time.Millisecond, GatewayMaxDeliver: 3})
	ch := newSendChannel("test")
	ch.fail = func(env *envelope.Envelope, try int) error {
		switch env.ID {
		case "out-1":
			if try == 1 {
				return errors.New("telegram: 502 bad gateway")
			}
		case "out-b":
			ch.mu.Unlock() // a slow send (a flood wait, an upload)
			time.Sleep(1500 * time.Millisecond)
			ch.mu.Lock()
		}
		return nil
	}
	e.start(t, gateway.Options{Channels: provider(ch), Concurrency: 1, RetryDelay: time.Second})
	e.publishOutbound(t, "test", "test:a", "out-1", "")
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		return ch.triesOf("out-1") == 1, "out-1 not tried"
	})
	e.publishOutbound(t, "test", "test:b", "out-b", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		return ch.sentCount("out-1") == 1 && ch.sentCount("out-b") == 1,
			fmt.Sprintf("out-1 sent %d, out-b sent %d", ch.sentCount("out-1"), ch.sentCount("out-b"))
	})
	time.Sleep(500 * time.Millisecond) // let a late advisory land
	if info := e.consumerInfo(t, "test"); info.Delivered.Consumer != 2 {
		t.Errorf("%d deliveries for 2 replies: the held out-1 was not kept alive while the lane sent out-b", info.Delivered.Consumer)
	}
	st, err := e.js.Stream(t.Context(), e.names.DLQStream())
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := st.GetLastMsgForSubject(t.Context(), e.names.DLQ(dlq.ReasonMaxDelivered)); err == nil {
		t.Errorf("out-1 was sent to the user and also dead-lettered as max_delivered: %s", raw.Header.Get(subjects.HeaderDLQError))
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}
}

// TestClaimedElsewhereReplyIsNotOvertaken (failed before the fix): the
// "claimed elsewhere" path of handle (c.busy > 0) handed the message back
// with NakWithDelay and returned 0, so (*lane).send goes on with the session's
// next reply: the overtaking the change fixed for failed sends remains
// for a reply that finds a live claim. A live claim left by a gateway that
// died mid-send (its message comes back at the ack wait, when the claim,
// refreshed right after the message's last in-progress ack, is a few ms
// short of stale; or a claim written just before the crash, as here):
//
//	out-1 (session a): claim is live -> NakWithDelay(~500ms), return 0
//	out-2 (session a): sent at once
//	~500ms later: out-1 comes back, the claim is stale, out-1 is sent
//
// The chat gets out-2 before out-1, both sent by this one instance
// (doc.go: "A session's replies are sent in order ... order holds within
// an instance"). Expected: out-1, out-2.
func TestClaimedElsewhereReplyIsNotOvertaken(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayAckWait: 500 * time.Millisecond})
	kv, err := e.js.KeyValue(t.Context(), e.names.DeliveredBucket())
	if err != nil {
		t.Fatal(err)
	}
	// The claim of a gateway that died sending out-1.
	if _, err := kv.Create(t.Context(), e.names.DeliveredKey("test", "out-1"), []byte("claimed")); err != nil {
		t.Fatal(err)
	}
	ch := newSendChannel("test")
	e.start(t, gateway.Options{Channels: provider(ch), Concurrency: 1})
	e.publishOutbound(t, "test", "test:a", "out-1", "")
	e.publishOutbound(t, "test", "test:a", "out-2", "")
	natstest.Eventually(t, 10*time.Second, func() (bool, string) {
		ok, why := e.settled(t, "test")
		return ok && len(ch.sentInOrder()) == 2, why
	})
	if got, want := ch.sentInOrder(), []string{"out-1", "out-2"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v: the claimed-elsewhere out-1 was overtaken by its session's next reply", got, want)
	}
}

// TestRetriesInTheLaneCountAcrossARestart (failed before the fix, which
// keeps the failed sends in the claim): handle counted a message's sends
// as md.NumDelivered + tries, tries living only in the lane's held entry. When the gateway stops, handBack NAKs the held
// message: the server counts one more delivery, and the lane's retries
// are forgotten. With GatewayMaxDeliver 3:
//
//	gateway 1: delivery 1, send 1 fails, held; send 2 (tries 1) fails, held
//	Stop: NakWithDelay (server: delivered once)
//	gateway 2: delivery 2 (tries 0 -> "2nd send"), send 3 fails, held;
//	           send 4 ("3rd send") fails -> dead-lettered
//
// Four sends instead of three; each restart hands a failing reply a
// fresh budget (and restarts its backoff), up to M(M+1)/2 sends for
// GatewayMaxDeliver M (55 for the default 10) with restarts between
// its retries. Before the change each failure was a delivery and the
// bound held across restarts. Expected (doc.go: sent again "until its
// deliveries and retries reach GatewayMaxDeliver"): 3 sends in all.
func TestRetriesInTheLaneCountAcrossARestart(t *testing.T) {
	e := setup(t, natsx.Topology{GatewayMaxDeliver: 3})
	failing := func(*envelope.Envelope, int) error { return errors.New("telegram: 502 bad gateway") }
	first := newSendChannel("test")
	first.fail = failing
	g, _ := e.start(t, gateway.Options{Channels: provider(first), Concurrency: 1, RetryDelay: 300 * time.Millisecond})
	e.publishOutbound(t, "test", "test:a", "out-1", "")
	// Send 2 at +300ms; send 3 would be at +900ms.
	natstest.Eventually(t, 5*time.Second, func() (bool, string) {
		return first.triesOf("out-1") == 2, fmt.Sprintf("%d tries", first.triesOf("out-1"))
	})
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := newSendChannel("test")
	second.fail = failing
	e.start(t, gateway.Options{Channels: provider(second), Concurrency: 1, RetryDelay: 300 * time.Millisecond})
	e.deadLetter(t, dlq.ReasonSendFailed)
	time.Sleep(300 * time.Millisecond)
	if n := first.triesOf("out-1") + second.triesOf("out-1"); n != 3 {
		t.Fatalf("out-1 sent %d times (%d before the restart, %d after), want GatewayMaxDeliver = 3",
			n, first.triesOf("out-1"), second.triesOf("out-1"))
	}
}
