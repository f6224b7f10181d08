package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/admission"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
)

// ingressProc is one ingress instance over the cluster's NATS server: its
// own connection, gateway and HTTP server, nothing shared with another.
type ingressProc struct {
	url  string
	gw   *ingress.Gateway
	stop func()
}

func startIngress(t *testing.T, c *stacktest.Cluster) *ingressProc {
	t.Helper()
	nc, js := c.NATS.JetStream(t)
	gw, err := ingress.NewGateway(nc, js, c.Conn.Names, events.Source("ingress", "retry-test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ingress.NewServer(ingress.Config{}, gw, func(context.Context) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	stop := sync.OnceFunc(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = gw.Close()
		nc.Close()
	})
	t.Cleanup(stop)
	return &ingressProc{url: hs.URL + "/v1/messages", gw: gw, stop: stop}
}

// answer is a POST /v1/messages response with its outbounds kept raw, so
// a retry's can be compared byte for byte with the first answer's.
type answer struct {
	status    int
	ID        string            `json:"id"`
	Duplicate bool              `json:"duplicate"`
	Pending   bool              `json:"pending"`
	Outbounds []json.RawMessage `json:"outbounds"`
}

func postMessage(ctx context.Context, url, query, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+query, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("response %d is not JSON: %q", resp.StatusCode, raw)
	}
	return a, nil
}

func mustPost(t *testing.T, url, query, body string) answer {
	t.Helper()
	a, err := postMessage(t.Context(), url, query, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sameReply fails unless retry is a 200 duplicate carrying exactly the
// outbounds of first.
func sameReply(t *testing.T, what string, first, retry answer) {
	t.Helper()
	if retry.status != http.StatusOK || !retry.Duplicate || retry.Pending {
		t.Fatalf("%s: status %d duplicate %v pending %v, want 200 duplicate", what, retry.status, retry.Duplicate, retry.Pending)
	}
	if len(retry.Outbounds) != len(first.Outbounds) {
		t.Fatalf("%s: %d outbounds, want %d", what, len(retry.Outbounds), len(first.Outbounds))
	}
	for i := range first.Outbounds {
		if !bytes.Equal(first.Outbounds[i], retry.Outbounds[i]) {
			t.Fatalf("%s: outbound %d is\n%s\nwant\n%s", what, i, retry.Outbounds[i], first.Outbounds[i])
		}
	}
}

func content(t *testing.T, raw json.RawMessage) envelope.Envelope {
	t.Helper()
	var env envelope.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return env
}

// published is how many messages stream ever took (its last sequence):
// a retry that published anything would show.
func published(t *testing.T, c *stacktest.Cluster, stream string) uint64 {
	t.Helper()
	st, err := c.Conn.JS.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// onlyOneTurn checks that the model was called turns times and that the
// inbound and outbound streams took turns messages each: the retries
// published nothing and answered from what the first turn stored.
func onlyOneTurn(t *testing.T, c *stacktest.Cluster, turns int) {
	t.Helper()
	if n := len(c.LLM.Requests()); n != turns {
		t.Fatalf("the model was called %d times, want %d", n, turns)
	}
	if n := published(t, c, c.Conn.Names.InboundStream()); n != uint64(turns) {
		t.Fatalf("%d inbound messages published, want %d", n, turns)
	}
	if n := published(t, c, c.Conn.Names.OutboundStream()); n != uint64(turns) {
		t.Fatalf("%d outbound messages published, want %d", n, turns)
	}
}

// A retry after the answer, with or without ?wait, returns 200 with the
// original outbounds; the model ran once.
func TestRetryAfterTheAnswerReturnsTheOriginalReply(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{Script: fakellm.Script{Steps: []fakellm.Step{{Text: "the one answer"}}}})
	in := startIngress(t, c)
	body := `{"id":"r1","content":"hello","session_id":"retry"}`
	first := mustPost(t, in.url, "?wait=30s", body)
	if first.status != http.StatusOK || first.Duplicate || len(first.Outbounds) != 1 {
		t.Fatalf("first POST: %+v", first)
	}
	if env := content(t, first.Outbounds[0]); env.Content != "the one answer" || env.InReplyTo != "r1" {
		t.Fatalf("first reply %+v", env)
	}
	start := time.Now()
	sameReply(t, "retry with ?wait", first, mustPost(t, in.url, "?wait=30s", body))
	t.Logf("a retry after the answer took %v", time.Since(start))
	sameReply(t, "retry without ?wait", first, mustPost(t, in.url, "", body))
	onlyOneTurn(t, c, 1)
}

// A retry of a turn that is still running waits like the first POST and
// returns the same reply; so does a retry of a message that was accepted
// but has not started (a follow-up waiting for the running turn).
func TestRetryWhileTheTurnRunsWaitsForTheSameReply(t *testing.T) {
	follow, err := admission.ParsePolicy("follow_up")
	if err != nil {
		t.Fatal(err)
	}
	c := stacktest.Start(t, stacktest.Options{
		Script: fakellm.Script{Steps: []fakellm.Step{
			{Match: "first", Text: "slow answer", Delay: fakellm.Duration(1500 * time.Millisecond)},
			{Match: "second", Text: "queued answer"},
		}},
		Plugins: []hooks.Plugin{follow},
	})
	in := startIngress(t, c)
	slow := `{"id":"run1","content":"first","session_id":"busy"}`
	queued := `{"id":"run2","content":"second","session_id":"busy"}`
	type result struct {
		a   answer
		err error
	}
	firsts := make(chan result, 2)
	for _, body := range []string{slow, queued} {
		go func() {
			a, err := postMessage(t.Context(), in.url, "?wait=30s", body)
			firsts <- result{a, err}
		}()
		if body == slow {
			if _, err := c.LLM.WaitRequests(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first turn is inside its model call; the second cannot start
	// before it ends. Neither has finished.
	for _, id := range []string{"run1", "run2"} {
		if _, err := in.gw.Answer(t.Context(), id, false); !errors.Is(err, ingress.ErrUnfinished) {
			t.Fatalf("answer of %s during the first turn: %v, want ErrUnfinished", id, err)
		}
	}
	if a := mustPost(t, in.url, "", slow); a.status != http.StatusAccepted || !a.Duplicate || a.Pending || len(a.Outbounds) != 0 {
		t.Fatalf("retry without ?wait while running: %+v, want 202 duplicate", a)
	}
	retries := map[string]answer{"run1": mustPost(t, in.url, "?wait=30s", slow), "run2": mustPost(t, in.url, "?wait=30s", queued)}
	for range 2 {
		r := <-firsts
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.a.status != http.StatusOK || r.a.Duplicate || len(r.a.Outbounds) != 1 {
			t.Fatalf("first POST of %s: %+v", r.a.ID, r.a)
		}
		sameReply(t, "retry of "+r.a.ID, r.a, retries[r.a.ID])
	}
	if got := content(t, retries["run1"].Outbounds[0]).Content; got != "slow answer" {
		t.Fatalf("run1 answered %q", got)
	}
	if got := content(t, retries["run2"].Outbounds[0]).Content; got != "queued answer" {
		t.Fatalf("run2 answered %q", got)
	}
	onlyOneTurn(t, c, 2)
}

// The answer lives in JetStream, not in the ingress: after the ingress
// that took the first POST stopped (mid-turn, so its client never got the
// reply), a new ingress on the same NATS answers a retry with it, waiting
// for the turn; a retry after the answer gets it at once.
func TestRetryAcrossAnIngressRestartReturnsTheOriginalReply(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{Script: fakellm.Script{Steps: []fakellm.Step{
		{Text: "answer after the restart", Delay: fakellm.Duration(time.Second)},
	}}})
	old := startIngress(t, c)
	body := `{"id":"restart1","content":"hello","session_id":"restart"}`
	lost := make(chan error, 1)
	go func() {
		_, err := postMessage(t.Context(), old.url, "?wait=30s", body)
		lost <- err
	}()
	if _, err := c.LLM.WaitRequests(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	old.stop()
	if err := <-lost; err == nil {
		t.Fatal("the first POST got an answer from a stopped ingress")
	}
	restarted := startIngress(t, c)
	first := mustPost(t, restarted.url, "?wait=30s", body)
	if first.status != http.StatusOK || !first.Duplicate || len(first.Outbounds) != 1 {
		t.Fatalf("retry after the restart, during the turn: %+v", first)
	}
	if env := content(t, first.Outbounds[0]); env.Content != "answer after the restart" || env.InReplyTo != "restart1" {
		t.Fatalf("reply %+v", env)
	}
	restarted.stop()
	again := startIngress(t, c)
	sameReply(t, "retry after a second restart", first, mustPost(t, again.url, "?wait=30s", body))
	onlyOneTurn(t, c, 1)
}

// A turn that failed answered its first POST with one error envelope; a
// retry returns that same envelope.
func TestRetryOfAFailedTurnReturnsTheSameError(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{Script: fakellm.Script{Steps: []fakellm.Step{
		{Error: &fakellm.Error{Status: 400, Message: "temperature is not supported", Type: "invalid_request_error"}},
	}}})
	in := startIngress(t, c)
	body := `{"id":"fail1","content":"hello","session_id":"fails"}`
	first := mustPost(t, in.url, "?wait=30s", body)
	if first.status != http.StatusOK || len(first.Outbounds) != 1 {
		t.Fatalf("first POST: %+v", first)
	}
	if env := content(t, first.Outbounds[0]); env.Kind != envelope.KindError || !strings.Contains(env.Content, "temperature is not supported") {
		t.Fatalf("first reply %+v, want the error envelope", env)
	}
	sameReply(t, "retry of the failed turn", first, mustPost(t, in.url, "?wait=30s", body))
	onlyOneTurn(t, c, 1)
}

// Two requests may wait for the replies of one id on one ingress (a retry
// beside the first POST): releasing one leaves the other waiting, and the
// reply reaches it.
func TestWaitersOfOneIDAreIndependent(t *testing.T) {
	f := setup(t, ingress.Config{})
	first := f.gw.Expect("same")
	retry := f.gw.Expect("same")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := retry(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("released retry: %v", err)
	}
	f.reply(t, "s", envelope.Envelope{ID: "same/0", Content: "reply", InReplyTo: "same", BatchSize: 1})
	wctx, wcancel := context.WithTimeout(t.Context(), stacktest.Wait)
	defer wcancel()
	outs, err := first(wctx)
	if err != nil || len(outs) != 1 || outs[0].ID != "same/0" {
		t.Fatalf("first waiter got %v, %v", outs, err)
	}
}

// A turn stopped by ,quit sends no reply: its first POST waits in vain,
// and a retry learns at once, from the done marker, that none will come
// (200 without outbounds).
func TestRetryOfAQuitTurnSaysThereIsNoReply(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{Script: fakellm.Script{Steps: []fakellm.Step{
		{Text: "never sent", Delay: fakellm.Duration(time.Minute)},
	}}})
	in := startIngress(t, c)
	body := `{"id":"quitme","content":"hello","session_id":"quit"}`
	firsts := make(chan answer, 1)
	go func() {
		a, _ := postMessage(t.Context(), in.url, "?wait=30s", body) // ended by stop, so without an answer
		firsts <- a
	}()
	if _, err := c.LLM.WaitRequests(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	quit := mustPost(t, in.url, "?wait=30s", `{"id":"quitter","content":",quit","session_id":"quit"}`)
	if quit.status != http.StatusOK || len(quit.Outbounds) != 1 {
		t.Fatalf(",quit: %+v", quit)
	}
	retry := mustPost(t, in.url, "?wait=30s", body)
	if retry.status != http.StatusOK || !retry.Duplicate || len(retry.Outbounds) != 0 {
		t.Fatalf("retry of the stopped turn: %+v, want 200 duplicate without outbounds", retry)
	}
	in.stop() // ends the first POST, which no reply would end
	if a := <-firsts; len(a.Outbounds) != 0 {
		t.Fatalf("the stopped turn's first POST got %+v", a)
	}
}
