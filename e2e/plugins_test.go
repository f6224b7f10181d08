package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/examples/plugins/opsbot"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/proctest"
)

// TestCustomBuild follows docs/plugins.md literally: it takes the go.mod
// and main.go of "Your own bub", builds them in a module outside the
// repository (its replace directive pointed at this checkout) and runs the
// binary: the plugin's CLI command, `hooks`, and `up` with the plugin's
// webhook channel, where a message goes through a turn whose model sees
// the plugin's system prompt and whose shell call the plugin denies, and
// the reply comes back through the channel.
func TestCustomBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary in a temporary module")
	}
	bin := buildFromDocs(t)
	home := t.TempDir()
	env := []string{"BUB_HOME=" + home}

	out := runBin(t, bin, env, "opsbot-check", "rm -rf /")
	if !strings.Contains(out, `denied: opsbot policy: commands containing "rm -rf" are not allowed`) {
		t.Errorf("opsbot-check = %q, want the denial", out)
	}

	hooksOut := runBin(t, bin, env, "hooks")
	// The builtin implements every one of these but after_tool_call.
	for h, want := range map[string]string{
		"register_cli_commands": `\]: opsbot, builtin$`, "system_prompt": `\]: opsbot, builtin$`,
		"before_tool_call": `\]: opsbot, builtin$`, "provide_channels": `\]: opsbot, builtin$`,
		"after_tool_call": `\]: opsbot$`,
	} {
		if line := lineOf(hooksOut, h+" "); !regexp.MustCompile(want).MatchString(line) {
			t.Errorf("hooks: %s line = %q, want it to match %s", h, line, want)
		}
	}

	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{
		{Match: "how full", ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"cmd": "rm -rf /var/log/old"}`)}}},
		{Text: "I may not delete logs here; / is 42% full."},
	}})
	replies := make(chan opsbot.WebhookMessage, 4)
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m opsbot.WebhookMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("callback: %v", err)
		}
		replies <- m
	}))
	defer callback.Close()
	hook := freeAddr(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	natsAddr := freeAddr(t)
	up := startBin(t, bin, append(env,
		"BUB_MODEL=openai:fake", "BUB_API_BASE="+base, "BUB_API_KEY=x",
		"OPSBOT_WEBHOOK_ADDR="+hook, "OPSBOT_WEBHOOK_CALLBACK="+callback.URL, "OPSBOT_AUDIT_FILE="+audit,
		"BUB_ENABLED_CHANNELS=webhook",
	), "up", "--http", freeAddr(t), "--nats-listen", natsAddr)
	defer up.stop(t, 30*time.Second)

	msg := `{"id":"ops-1","chat_id":"ops","text":"how full is /var?"}`
	eventually(t, 30*time.Second, func() (bool, string) {
		resp, err := http.Post("http://"+hook+"/message", "application/json", strings.NewReader(msg))
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusAccepted, resp.Status + " " + string(b)
	})
	select {
	case r := <-replies:
		if r.ChatID != "ops" || r.InReplyTo != "ops-1" || r.Text != "I may not delete logs here; / is 42% full." {
			t.Errorf("reply through the webhook channel = %+v", r)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no reply came back through the webhook channel")
	}

	reqs := fake.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	if sys := reqs[0].Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content.PlainText(), opsbot.HouseRules) {
		t.Errorf("first request's system message does not hold the plugin's fragment: %+v", sys)
	}
	var toolResult string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			toolResult = m.Content.PlainText()
		}
	}
	if !strings.Contains(toolResult, "opsbot policy") {
		t.Errorf("the tool result the model saw = %q, want the plugin's denial", toolResult)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(audit)
		return bytes.Contains(b, []byte(`"call_id":"call_1"`)), "audit file: " + string(b)
	})
	select {
	case r := <-replies:
		t.Errorf("a second reply arrived: %+v", r)
	default:
	}

	// The recorded session replays identically through the build that
	// recorded it (bub replay); the stock bub, without opsbot, shows the
	// denial it no longer makes in its diff and exits 1.
	const session = "webhook:ops"
	nats := []string{"--nats", "nats://" + natsAddr}
	eventually(t, 30*time.Second, func() (bool, string) { // until the recorder committed the turn
		out, stderr, err := tryBin(bin, env, append([]string{"replay", session}, nats...)...)
		return err == nil && strings.Contains(out, session+": 1 turns, 1 identical, 0 differ"), fmt.Sprintf("%v\n%s%s", err, out, stderr)
	})
	stockOut, _, err := tryBin(binary(t, "bub"), env, append([]string{"replay", session}, nats...)...)
	want := `-step 1 before_tool_call opsbot deny {"message":"opsbot policy: commands containing \"rm -rf\" are not allowed"}`
	if code := exitCode(err); code != 1 || !strings.Contains(string(stockOut), "hook decisions DIFFER") || !strings.Contains(string(stockOut), want) {
		t.Errorf("stock bub replay: exit %d (want 1), output\n%s\nwant the decisions to differ with the line %s", code, stockOut, want)
	}
}

// exitCode is the exit status of a command's error (0 for nil, -1 when it
// did not run).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// buildFromDocs writes the go.mod and main.go of docs/plugins.md into a
// temporary module, points its replace directive at this checkout and
// builds it (go mod tidy, go build) as the page says.
func buildFromDocs(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := docFiles(t, filepath.Join(root, "docs", "plugins.md"))
	gomod, ok := files["go.mod"]
	if !ok || !strings.Contains(gomod, "=> ../bub") || files["main.go"] == "" {
		t.Fatalf("docs/plugins.md lacks the go.mod (with replace => ../bub) or main.go blocks: %v", files)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", strings.Replace(gomod, "=> ../bub", "=> "+root, 1))
	write("main.go", files["main.go"])
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum)) // what tidy would download, already verified
	goCmd := func(args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a cold build on a loaded machine
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	goCmd("mod", "tidy")
	start := time.Now()
	goCmd("build", "-o", "mybub", ".")
	bin := filepath.Join(dir, "mybub")
	if st, err := os.Stat(bin); err == nil {
		t.Logf("built %s (%.1f MB) in %v", bin, float64(st.Size())/1e6, time.Since(start).Round(time.Second))
	}
	return bin
}

// docFiles returns the code blocks of a markdown page that follow a
// "<!-- file: NAME -->" line, by NAME.
func docFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```[a-z]*\n(.*?)```")
	files := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		files[m[1]] = m[2]
	}
	return files
}

func lineOf(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// runBin runs a binary outside ./bin to completion and returns its stdout.
func runBin(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	out, stderr, err := tryBin(bin, env, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// tryBin runs a binary to completion (2 minutes at most) and returns its
// stdout, its stderr and how it failed.
func tryBin(bin string, env []string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	return string(out), errBuf.String(), err
}

// startBin starts a binary outside ./bin like start does.
func startBin(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	return &proc{proctest.Start(t, bin, append([]string{"BUB_LOG_LEVEL=debug"}, env...), args...)}
}
