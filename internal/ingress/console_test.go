package ingress_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/ingress"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/hooks/interceptor"
	"github.com/bubbus/bub/pkg/hooks/remote"
	"github.com/bubbus/bub/pkg/tools"
)

// denyTools denies every tool call, so the console's tape shows a hook
// decision.
type denyTools struct{}

func (denyTools) Name() string { return "deny-tools" }

func (denyTools) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return tools.Deny("tools are off in the console test"), nil
}

// audit serves before_tool_call as an interceptor service without
// opinions, so the console shows an interceptor with its statistics.
type audit struct{}

func (audit) Name() string { return "audit" }

func (audit) BeforeToolCall(context.Context, hooks.BeforeToolCallInput) (*tools.Decision, error) {
	return nil, nil
}

// chromium returns the path of a Chromium or Chrome binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifact returns where the test keeps file name: $BUB_ARTIFACTS when
// set, else the test's temporary directory.
func artifact(t *testing.T, name string) string {
	dir := os.Getenv("BUB_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

const streamedReply = "The console streams this reply to the browser, word by word."

// TestConsoleInBrowser drives the web console in headless Chromium against
// a real stack (embedded NATS, worker, recorder, fake model) behind a
// bearer token: without the token the page says one is required; with it,
// it lists status (with the worker instance NATS micro discovery finds)
// and the worker's hooks, sends a message, shows the reply as it streams
// over the SSE tap, then the new tape entries with the hook
// decision highlighted, and the interceptor service with its request
// count, and a search of the tape. It keeps two screenshots.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary found (install it with: apt-get install -y chromium)")
	}
	c := stacktest.Start(t, stacktest.Options{
		Plugins:      []hooks.Plugin{denyTools{}},
		Interceptors: []remote.Config{{Service: "audit", Hooks: []hooks.Hook{hooks.HookBeforeToolCall}}},
		Script: fakellm.Script{Steps: []fakellm.Step{
			{ToolCalls: []fakellm.ToolCall{{Name: "bash", Arguments: json.RawMessage(`{"cmd":"echo hi"}`)}}},
			{Text: streamedReply, Chunks: 12, ChunkDelay: fakellm.Duration(60 * time.Millisecond)},
		}},
	})
	svc, err := interceptor.Serve(t.Context(), c.NATS.Conn(t), c.Conn.Names, audit{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	const token = "console-secret"
	srv, err := ingress.NewServer(ingress.Config{Token: token}, c.Gateway, func(context.Context) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	actx, cancel := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1600, 1100))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	do(t, ctx, "load the console without a token",
		chromedp.Navigate(hs.URL+"/ui"),
		chromedp.WaitVisible(chromedp.CSS("#send-form")),
		poll(`document.querySelector("#notice").textContent.includes("token is required")`))

	do(t, ctx, "enter the token",
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#token-form button")),
		poll(`document.querySelector("#hooks").textContent.includes("before_tool_call")`),
		poll(`document.querySelector("#status").textContent.includes("BUB_INBOUND")`),
		poll(`document.querySelector("#status").textContent.includes("t-w0")`))
	hooksText, statusText := text(t, ctx, "#hooks"), text(t, ctx, "#status")
	for _, want := range []string{"as reported by worker t-w", "resolve_session", "before_tool_call", "1. audit (remote: audit)2. deny-tools3. builtin"} {
		if !strings.Contains(hooksText, want) {
			t.Errorf("hooks panel lacks %q:\n%s", want, hooksText)
		}
	}
	for _, want := range []string{"max_payload 8.0 MiB", "Streams", "BUB_EVENTS", "Consumers", "Servicesserviceinstanceversionmax_payloadup since", "workert-w00.0.0-devel8.0 MiB", "t-w0", "concurrency", "recorder lag", "Dead letters"} {
		if !strings.Contains(statusText, want) {
			t.Errorf("status panel lacks %q:\n%s", want, statusText)
		}
	}

	// While the reply streams, its bubble is marked streaming and holds
	// part of the text: the deltas reached the page before the reply.
	do(t, ctx, "send a message",
		chromedp.SetValue(chromedp.CSS("#session-input"), "console:browser"),
		chromedp.Click(chromedp.CSS("#session-form button")),
		poll(`document.querySelector("#tap-state").textContent === "open"`),
		chromedp.SendKeys(chromedp.CSS("#message"), "please list the workspace"),
		chromedp.Click(chromedp.CSS("#send-form button")),
		poll(`(() => { const b = document.querySelector(".bubble.reply.streaming[data-run] .text");
			return b && b.textContent.length > 0 && b.textContent.length < `+strconv.Itoa(len(streamedReply))+` })()`))
	if partial := text(t, ctx, ".bubble.reply[data-run] .text"); !strings.HasPrefix(streamedReply, partial) || partial == streamedReply {
		t.Errorf("streaming bubble %q is not a part of the reply", partial)
	}

	do(t, ctx, "see the reply and the tape",
		poll(`(() => { const b = document.querySelector(".bubble.reply[data-run]:not(.streaming) .text");
			return b && b.textContent.includes("word by word") })()`),
		poll(`document.querySelector("#tape").textContent.includes("word by word")`),
		poll(`document.querySelector("#sessions").textContent.includes("console:browser")`))
	if reply := text(t, ctx, ".bubble.reply[data-run] .text"); reply != streamedReply {
		t.Errorf("reply bubble %q, want %q", reply, streamedReply)
	}
	tapeText := text(t, ctx, "#tape")
	for _, want := range []string{"user: ", "please list the workspace", "hook.decision", "tools are off in the console test", "assistant: " + streamedReply} {
		if !strings.Contains(tapeText, want) {
			t.Errorf("tape panel lacks %q:\n%s", want, tapeText)
		}
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tape li.decision").length`)); err != nil || n == 0 {
		t.Errorf("highlighted hook decisions in the tape: %d, %v\n%s", n, err, tapeText)
	}
	events := text(t, ctx, "#events")
	for _, want := range []string{"run.started", "llm_call.started", "hook.decision", "deny-tools before_tool_call → deny", "run.finished"} {
		if !strings.Contains(events, want) {
			t.Errorf("live tap lacks %q:\n%s", want, events)
		}
	}

	// The run refreshed the status: the interceptor answered the tool call.
	do(t, ctx, "see the interceptor's statistics",
		poll(`document.querySelector("#interceptors").textContent.includes("before_tool_call1")`))
	if ics := text(t, ctx, "#interceptors"); !strings.Contains(ics, "audit") {
		t.Errorf("interceptors panel %q lacks the audit service", ics)
	}

	screenshot(t, ctx, "console.png")

	// A search keeps the matching entries, the query marked: the denial's
	// hook decision (highlighted) and the tool result it produced.
	do(t, ctx, "search the tape",
		chromedp.SendKeys(chromedp.CSS("#tape-q"), "tools are off\r"),
		poll(`document.querySelectorAll("#tape mark").length > 0`))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tape li.decision").length`)); err != nil || n != 1 {
		t.Errorf("search results with a highlighted decision: %d, %v", n, err)
	}
	if r := text(t, ctx, "#tape-range"); r != "1–2 of 2" {
		t.Errorf("search range %q, want 1–2 of 2 (the decision and the tool result)", r)
	}

	screenshot(t, ctx, "console-search.png")
}

// screenshot keeps a screenshot of the whole page as the artifact name:
// the viewport grows to the page's height (a capture beyond the viewport
// would lay the page out again and lose the scroll positions of its
// panels).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	h, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollHeight`))
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "size the viewport", chromedp.EmulateViewport(1600, h))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := artifact(t, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshot: %s", path)
}

// do runs the steps of the browser session, failing the test with their
// name.
func do(t *testing.T, ctx context.Context, step string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// text returns the text content of the element sel selects.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).textContent`))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// poll waits until the JavaScript expression is true.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
}
