package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/natstest"
)

// A fail-closed before_llm_call interceptor that is not running aborts the
// LLM call: the user is told so in Bub's words, with a kind, and the
// abort is a hook.decision like a denial.
func TestFailClosedLLMCallAbortIsExplained(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	_, base := fakellm.Start(t, fakellm.Script{})
	env := []string{"BUB_NATS_URL=" + srv.URL, "BUB_MODEL=openai:fake", "BUB_API_BASE=" + base, "BUB_API_KEY=x",
		"BUB_INTERCEPTORS=gate",
		"BUB_INTERCEPTOR_GATE_FAILURE=closed",
		"BUB_INTERCEPTOR_GATE_HOOKS=before_llm_call"}
	decisions := icWatchDecisions(t, nc)
	httpAddr := freeAddr(t)
	start(t, "worker", env, "--workspace", t.TempDir())
	start(t, "ingress", env, "--http", httpAddr)
	web := "http://" + httpAddr
	waitHTTP(t, web+"/readyz", 30*time.Second)

	got := icTurn(t, web, "ic:abort", "hello")
	want := `An error occurred at stage 'turn': [temporary] before_llm_call: interceptor "gate" has no running instance, and it fails closed; the call was aborted.`
	if got != want {
		t.Fatalf("reply\n%q\nwant\n%q", got, want)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		d, ok := decisions.find("ic:abort", "gate", "abort")
		return ok && d.Remote && d.Hook == "before_llm_call" && d.Error != nil && strings.Contains(d.Error.Message, "fails closed"),
			"decisions: " + strings.Join(decisions.of("ic:abort"), "; ")
	})
}
