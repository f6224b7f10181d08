package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/config"
)

// bubResult is what one bub command printed.
type bubResult struct {
	stdout, stderr string
}

// runBub runs bin/bub to completion with exactly env (plus PATH and HOME)
// and fails the test on a non-zero exit.
func runBub(t *testing.T, env []string, args ...string) bubResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, "bub"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bub %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return bubResult{stdout.String(), stderr.String()}
}

// runModel returns the model the run of session recorded on its tape
// (the loop.start event).
func runModel(t *testing.T, home, session string) string {
	t.Helper()
	tape := runBub(t, nil, "tape", "show", "--home", home, "--json", session).stdout
	for line := range strings.Lines(tape) {
		if strings.Contains(line, `"name": "loop.start"`) {
			_, after, _ := strings.Cut(line, `"model": "`)
			model, _, _ := strings.Cut(after, `"`)
			return model
		}
	}
	t.Fatalf("no loop.start on the tape of %s:\n%s", session, tape)
	return ""
}

// TestOnboardConfigFileAndPrecedence: `bub onboard` writes
// <home>/config.yaml (0600) non-interactively; a later `bub run` uses its
// model; BUB_MODEL beats the file; and for a setting with a flag the
// chain is flag > env > file.
func TestOnboardConfigFileAndPrecedence(t *testing.T) {
	home := t.TempDir()
	path := config.Path(home)
	res := runBub(t, nil, "onboard", "--home", home, "--non-interactive", "--set", "model=echo:onboarded", "--set", "api_key=sk-e2e-secret")
	if !strings.Contains(res.stdout, "Saved config to "+path) || strings.Contains(res.stdout+res.stderr, "sk-e2e-secret") {
		t.Fatalf("onboard output (want the saved line, never the key):\n%s%s", res.stdout, res.stderr)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file %v, %v; want mode 0600", st, err)
	}
	c, err := config.Load(path)
	if err != nil || c["model"] != "echo:onboarded" || c["api_key"] != "sk-e2e-secret" {
		t.Fatalf("config.yaml = %v, %v", c, err)
	}

	// The file beats the default model (echo:echo).
	out := runBub(t, nil, "run", "--home", home, "--session", "from-file", "hello from the file").stdout
	if !strings.Contains(out, "hello from the file") {
		t.Fatalf("run output %q lacks the echo reply", out)
	}
	if got := runModel(t, home, "from-file"); got != "echo:onboarded" {
		t.Errorf("model from the config file = %q, want echo:onboarded", got)
	}
	// The environment beats the file; BUB_HOME finds the file like --home.
	runBub(t, []string{"BUB_MODEL=echo:from-env"}, "run", "--home", home, "--session", "from-env", "hi")
	if got := runModel(t, home, "from-env"); got != "echo:from-env" {
		t.Errorf("model with BUB_MODEL set = %q, want echo:from-env", got)
	}
	runBub(t, []string{"BUB_HOME=" + home}, "run", "--session", "via-env-home", "hi")
	if got := runModel(t, home, "via-env-home"); got != "echo:onboarded" {
		t.Errorf("model with BUB_HOME (no --home) = %q, want echo:onboarded", got)
	}

	// A flag beats the environment, which beats the file: the log level.
	// Debug logs show the configuration, never the key.
	if err := config.Save(path, config.Config{"model": "echo:onboarded", "api_key": "sk-e2e-secret", "log_level": "debug"}); err != nil {
		t.Fatal(err)
	}
	const debugLine = "level=DEBUG"
	if res := runBub(t, nil, "run", "--home", home, "--session", "s", "hi"); !strings.Contains(res.stderr, debugLine) || strings.Contains(res.stdout+res.stderr, "sk-e2e-secret") {
		t.Errorf("log_level: debug in the file: want debug logs without the key:\n%s", res.stderr)
	}
	if e := runBub(t, []string{"BUB_LOG_LEVEL=error"}, "run", "--home", home, "--session", "s", "hi").stderr; strings.Contains(e, "level=") {
		t.Errorf("BUB_LOG_LEVEL=error did not beat the file:\n%s", e)
	}
	if e := runBub(t, []string{"BUB_LOG_LEVEL=error"}, "run", "--home", home, "--log-level", "debug", "--session", "s", "hi").stderr; !strings.Contains(e, debugLine) {
		t.Errorf("--log-level debug did not beat BUB_LOG_LEVEL=error:\n%s", e)
	}
}

// TestOnboardAbortWritesNothing is behaviour check 89 with the binary: the
// input ends at the API-key prompt, so bub exits 1, asks nothing more and
// writes no file.
func TestOnboardAbortWritesNothing(t *testing.T) {
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, "bub"), "onboard", "--home", home)
	cmd.Stdin = strings.NewReader("openai\ngpt-4o\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("bub onboard = %v, want exit code 1\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "API key (optional)") || strings.Contains(out.String(), "API base") {
		t.Errorf("want the API-key prompt and nothing after it:\n%s", out.String())
	}
	if _, err := os.Stat(config.Path(home)); !os.IsNotExist(err) {
		t.Errorf("a config file was written: %v", err)
	}
}

// TestOnboardBrokenConfigFileIsNamed: a config file that is not YAML stops
// every command with an error naming the file and line.
func TestOnboardBrokenConfigFileIsNamed(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(config.Path(home), []byte("model: echo:x\nfallback_models: [a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t, "bub"), "run", "--home", home, "hi")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), config.Path(home)+":2:") {
		t.Errorf("bub run with a broken config = %v, output %q; want an error naming %s:2", err, out, config.Path(home))
	}
}
