package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/channels/telegram/telegramtest"
)

// TestTelegram runs the builtin telegram channel end to end against a fake
// Bot API with two gateway instances: the one inside `bub up` and a
// standalone `bub gateway` on the same NATS. A user message goes through a
// model turn and the reply comes back through sendMessage; a second
// message sent while that turn runs is a follow-up (BUB_ADMISSION), so it
// runs after the first turn, with the first answer in its context; and
// every reply is sent exactly once although both gateways poll and
// deliver.
func TestTelegram(t *testing.T) {
	tg := telegramtest.NewServer(t)
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Match: "first question", Text: "first answer", Delay: fakellm.Duration(2 * time.Second)},
		{Match: "second question", Text: "second answer"},
		{Match: "third question", Text: "third answer"},
	}})
	natsAddr := freeAddr(t)
	env := []string{
		"BUB_HOME=" + t.TempDir(),
		"BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x",
		"BUB_TELEGRAM_TOKEN=" + tg.Token(), "BUB_TELEGRAM_API_BASE=" + tg.URL(),
		"BUB_ADMISSION=telegram:follow_up", "BUB_DEBOUNCE_SECONDS=0.1",
	}
	httpAddr := freeAddr(t)
	up := start(t, "bub", env, "up", "--http", httpAddr, "--nats-listen", natsAddr)
	defer up.stop(t, 30*time.Second)
	waitHTTP(t, "http://"+httpAddr+"/readyz", 30*time.Second)
	gw := start(t, "bub", append(env, "BUB_NATS_URL=nats://"+natsAddr), "gateway")
	defer gw.stop(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Both gateways have started polling once each called deleteWebhook
	// (dropping what was pending) and then getUpdates.
	if err := tg.Wait(ctx, func() bool { return countCalls(tg, "deleteWebhook") >= 2 && countCalls(tg, "getUpdates") >= 2 }); err != nil {
		t.Fatalf("the two gateways did not start polling: %v (calls %v)", err, tg.Calls())
	}

	if _, err := tg.SendUserMessage(42, "first question"); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.WaitRequests(ctx, 1); err != nil {
		t.Fatalf("the first turn did not reach the model: %v", err)
	}
	if _, err := tg.SendUserMessage(42, "second question"); err != nil {
		t.Fatal(err)
	}
	sent, err := tg.WaitSent(ctx, 2)
	if err != nil {
		t.Fatalf("replies: %v (sent %v)", err, tg.Sent())
	}
	if sent[0].Text != "first answer" || sent[1].Text != "second answer" || sent[0].ChatID != "42" {
		t.Errorf("replies = %+v, want first answer then second answer in chat 42", sent)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].LastUserText(), "second question") {
		t.Fatalf("model requests = %d, want 2 with the second question last", len(reqs))
	}
	var sawFirst bool
	for _, m := range reqs[1].Messages {
		sawFirst = sawFirst || (m.Role == "assistant" && m.Content.PlainText() == "first answer")
	}
	if !sawFirst {
		t.Error("the follow-up's context lacks the first answer: it did not run after the first turn")
	}

	// A third turn after both: when its reply is in, any duplicate of the
	// first two would have been sent too.
	if _, err := tg.SendUserMessage(42, "third question"); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.WaitSent(ctx, 3); err != nil {
		t.Fatalf("third reply: %v", err)
	}
	if got := tg.Sent(); len(got) != 3 || got[2].Text != "third answer" {
		t.Errorf("sendMessage calls = %+v, want exactly the three answers once each", got)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("the model got %d requests, want 3 (each message processed once)", n)
	}
}

func countCalls(tg *telegramtest.Server, method string) int {
	n := 0
	for _, c := range tg.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}
