package toolkit

import (
	"slices"
	"strings"
	"testing"
)

func TestScrubEnv(t *testing.T) {
	kept, secrets := ScrubEnv([]string{
		"PATH=/bin", "HOME=/h", "BUB_API_KEY=sk-abcdef", "OPENAI_API_KEY=sk-openai-1", "BUB_NATS_PASSWORD=hunter22",
		"BUB_INGRESS_TOKEN=tok-123456", "BUB_NATS_URL=nats://x", "AWS_SECRET_ACCESS_KEY=aws-secret", "GITHUB_TOKEN=ab", "EMPTY_KEY=",
		`BUB_MCP_SERVERS={"s":{"url":"http://h/","headers":{"X-Api":"v"}}}`,
	})
	if want := []string{"PATH=/bin", "HOME=/h", "BUB_NATS_URL=nats://x"}; !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}
	if want := []string{"sk-abcdef", "sk-openai-1", "hunter22", "tok-123456", "aws-secret", `{"s":{"url":"http://h/","headers":{"X-Api":"v"}}}`}; !slices.Equal(secrets, want) {
		t.Fatalf("secrets %v, want %v", secrets, want)
	}
}

// TestShellsKeepSecretsFromCommands: a command does not inherit the
// worker's secrets, and output that shows one anyway is redacted.
func TestShellsKeepSecretsFromCommands(t *testing.T) {
	const secret = "sk-very-secret-4711"
	t.Setenv("BUB_API_KEY", secret)
	t.Setenv("BUB_HARMLESS", "visible")
	e := newEnv(t)
	got := e.run(t, "bash", e.tc("s"), map[string]any{"cmd": "env"})
	if strings.Contains(got, secret) || strings.Contains(got, "BUB_API_KEY") || !strings.Contains(got, "BUB_HARMLESS=visible") {
		t.Fatalf("env output:\n%s", got)
	}
	// A secret the command prints anyway (here: assembled by the shell)
	// is redacted; the e2e redaction test reads /proc/$PPID/environ of a
	// real worker.
	got = e.run(t, "bash", e.tc("s"), map[string]any{"cmd": "echo sk-very-''secret-4711"})
	if got != "[redacted]" {
		t.Fatalf("echoed secret: %q", got)
	}
	bg := e.background(t, "s", "echo sk-very-''secret-4711")
	waitExited(t, bg)
	out := e.run(t, "bash.output", nil, map[string]any{"shell_id": bg.id})
	if strings.Contains(out, secret) || !strings.Contains(out, "[redacted]") {
		t.Fatalf("bash.output:\n%s", out)
	}
}
