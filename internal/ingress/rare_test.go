package ingress_test

// Ingress on rare inputs and timings: ids NATS would rewrite, a retry's
// wait budget, replies of different batches of one turn, an event type
// that would break SSE framing. Each test failed before its fix; the
// comment above it says what went wrong and what is expected.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// Before the fix: the Nats-Msg-Id that deduplicates an inbound envelope is the
// envelope id as nats.go writes it into the message headers, which trims
// ASCII whitespace (space, tab, CR, LF) from both ends and turns inner
// CR/LF into spaces. envelope.Validate accepts such ids (it only rejects a
// blank one), so the distinct ids "rv1" and "rv1 " share one Nats-Msg-Id:
// the second, a different message with different content, is taken for a
// retry of the first. The stream keeps nothing, yet the client gets a 2xx
// ("duplicate": true) — a 2xx for a message that was not stored.
// Expected: such an id is rejected with a 422 naming it (nothing stored,
// nothing taken for a retry).
func TestIDsWithWhiteSpaceAtAnEndAreRejected(t *testing.T) {
	f := setup(t, ingress.Config{})
	url := f.srv.URL + "/v1/messages"
	status, body := post(t, url, jsonHeader(), `{"id":"rv1","content":"first message"}`)
	if status != http.StatusAccepted {
		t.Fatalf("first POST: %d %v", status, body)
	}
	for _, id := range []string{`rv1 `, `\trv1`, `rv1\r\n`, `r\nv1`} {
		status, body = post(t, url, jsonHeader(), `{"id":"`+id+`","content":"another message"}`)
		if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body), "white space") {
			t.Fatalf("POST of id %q: %d %v, want 422 naming the white space", id, status, body)
		}
	}
	if n := f.inboundCount(t); n != 1 {
		t.Fatalf("the inbound stream holds %d messages, want only the first", n)
	}
}

// slowAckJS is a JetStream whose publish acknowledgements arrive late (a
// slow or re-elected stream leader): the message is stored at once, the
// ack comes delay later, within one publish attempt.
type slowAckJS struct {
	jetstream.JetStream
	delay time.Duration
}

func (s slowAckJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := s.JetStream.PublishMsg(ctx, m, opts...)
	time.Sleep(s.delay)
	return ack, err
}

// Before the fix: ?wait bounds the whole request for a first POST (postMessage
// creates the reply context before publishing, server.go:234, so "the
// replies get what the publish leaves"), but a retry (the publish comes
// back Duplicate) calls answerRetry (server.go:258-262, retry.go:17-20), which starts a
// fresh timer of the full wait after the publish already spent part of
// it. A retried ?wait=1s POST whose publish took 800ms answers after about
// 1.8s; during a leader election a ?wait=30s retry can take close to a
// minute. Expected: the answer comes within the wait (plus the one-attempt
// allowance a wait shorter than an attempt gets, not hit here).
func TestRetryHonoursTheWaitBudget(t *testing.T) {
	const delay, wait = 800 * time.Millisecond, time.Second
	s := natstest.Start(t)
	nc, js := s.JetStream(t)
	names := subjects.Default()
	if err := natsx.EnsureTopology(context.Background(), js, names, natsx.Topology{}); err != nil {
		t.Fatal(err)
	}
	_, hs := serve(t, ingress.Config{}, nc, slowAckJS{JetStream: js, delay: delay}, names)
	body := `{"id":"budget1","content":"nobody answers","session_id":"budget"}`
	if status, b := post(t, hs.URL+"/v1/messages", jsonHeader(), body); status != http.StatusAccepted {
		t.Fatalf("first POST: %d %v", status, b)
	}
	start := time.Now()
	status, b := post(t, hs.URL+"/v1/messages?wait="+wait.String(), jsonHeader(), body)
	took := time.Since(start)
	if status != http.StatusAccepted || b["duplicate"] != true || b["pending"] != true {
		t.Fatalf("retry: %d %v, want 202 duplicate pending", status, b)
	}
	if took > wait+400*time.Millisecond {
		t.Fatalf("retry with ?wait=%v answered after %v: the publish's %v and then a whole new wait", wait, took.Round(10*time.Millisecond), delay)
	}
}

// Before the fix: a waiter files the replies it received by batch index
// (gateway.go:275, w.byIx[env.BatchIndex] = env.ID) and partial() returns
// only what byIx names (gateway.go:228-231). Envelopes of one turn from
// different batches share indexes: a turn whose dispatch fails after
// reply 0 of a batch of 2 was sent also sends on_error's error envelope
// (builtin.OnError: id "<in>/error/turn", BatchIndex 0, BatchSize 1). The
// error envelope overwrites reply 0 in byIx, so the first ?wait POST
// answers with the error alone though it received both, while a retry
// answers with both (the done marker names every reply the turn
// published): the first answer silently drops a reply and differs from
// the retry's. Expected: every envelope received is returned, in the
// order they were published.
func TestWaitKeepsRepliesOfDifferentBatchesWithTheSameIndex(t *testing.T) {
	f := setup(t, ingress.Config{})
	await := f.gw.Expect("b1")
	for _, out := range []envelope.Envelope{
		{ID: "b1/0", Content: "part one", InReplyTo: "b1", BatchIndex: 0, BatchSize: 2},
		{ID: "b1/error/turn", Content: "An error occurred at stage 'turn': dispatch failed", Kind: envelope.KindError, InReplyTo: "b1", BatchSize: 1},
	} {
		f.reply(t, "s", out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	outs, err := await(ctx)
	if err != nil {
		t.Fatalf("waiting: %v (got %v)", err, outs)
	}
	var got []string
	for _, o := range outs {
		got = append(got, o.ID)
	}
	if strings.Join(got, ",") != "b1/0,b1/error/turn" {
		t.Fatalf("the waiter returned %v, want [b1/0 b1/error/turn]: a reply it received was dropped", got)
	}
}

// Before the fix: streamSession writes a lifecycle event's CloudEvent type as the SSE
// event name unchecked (sse.go:69 with sse.go:101). CloudEvents
// validation only rejects a blank type, so an event on the session's
// subject whose type holds a line break breaks SSE's framing: the text
// after the break becomes lines of its own (here a forged "data:" line),
// against the documented "each event's data is one line of JSON" and the
// renderer's own invariant (FuzzSSEEvent: name and data one line each).
// Expected: such a message becomes an "invalid" event (or its name is
// sanitised), each frame being exactly one event line and one data line.
func TestEventTypeWithALineBreakCannotForgeSSELines(t *testing.T) {
	f := setup(t, ingress.Config{})
	resp, err := http.Get(f.srv.URL + "/v1/sessions/s1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), ": streaming session") {
		t.Fatalf("first line %q", lines.Text())
	}
	ev := `{"specversion":"1.0","id":"1","source":"/x","type":"dev.bub.turn.started.v1\ndata: {\"forged\":true}",` +
		`"datacontenttype":"application/json","data":{"a":1}}`
	msg := &nats.Msg{Subject: f.names.Event("s1", "turn.started"), Header: nats.Header{"Content-Type": {events.ContentTypeStructured}}, Data: []byte(ev)}
	if err := f.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	var frame []string
	for lines.Scan() {
		l := lines.Text()
		if strings.HasPrefix(l, ":") { // comment (keep-alive)
			continue
		}
		if l == "" {
			if len(frame) > 0 {
				break
			}
			continue
		}
		frame = append(frame, l)
	}
	if len(frame) != 2 || !strings.HasPrefix(frame[0], "event: ") || !strings.HasPrefix(frame[1], "data: ") {
		t.Fatalf("SSE frame %q: want one event line and one data line; the event type's line break forged a line", frame)
	}
}
