package app_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/examples/plugins/jsonltape"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/app"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

// run runs the bub command in-process and returns its stdout.
func run(t *testing.T, plugins []hooks.Plugin, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := app.Run(ctx, args, app.Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut}, plugins...); err != nil {
		t.Fatalf("bub %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// TestTapeStorePlugin: with the JSONL store plugin, `bub run` (embedded
// NATS, a worker and the recorder in process) writes the turn's tape
// through the plugin's store, and `bub tape show` reads it back through
// the same hook; the JetStream tape stream stays empty.
func TestTapeStorePlugin(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	plugins := []hooks.Plugin{jsonltape.New(dir)}
	out := run(t, plugins, "run", "--home", home, "hello tapes")
	if !strings.Contains(out, "[cli:local]") || !strings.Contains(out, "hello tapes") {
		t.Fatalf("bub run printed %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cli%3Alocal.jsonl"))
	if err != nil {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("the JSONL store has no tape for cli:local (%v); the directory holds %v", err, entries)
	}
	if !bytes.Contains(b, []byte("hello tapes")) || !bytes.Contains(b, []byte(`"kind": "message"`)) {
		t.Errorf("the JSONL tape lacks the turn:\n%s", b)
	}
	shown := run(t, plugins, "tape", "show", "--home", home, "cli:local")
	if !strings.Contains(shown, "hello tapes") {
		t.Errorf("bub tape show through the plugin = %q", shown)
	}
	if bare := run(t, nil, "tape", "list", "--home", home); strings.Contains(bare, "cli:local") {
		t.Errorf("the JetStream store holds the tape too: %q", bare)
	}
}

// TestHooksListsPlugins: `bub hooks` of a build lists its plugin on the
// hook it implements, above the builtin, and the builtin on each of the
// 17 seed hooks it implements (all but run_model, before_llm_call,
// after_llm_call and after_tool_call) and continue_prompt.
func TestHooksListsPlugins(t *testing.T) {
	out := run(t, []hooks.Plugin{jsonltape.New(t.TempDir())}, "hooks", "--home", t.TempDir())
	impls := map[string]string{}
	for l := range strings.Lines(out) {
		if hook, rest, ok := strings.Cut(l, " ["); ok {
			_, impls[hook], _ = strings.Cut(strings.TrimSpace(rest), "]: ")
		}
	}
	if got := impls["provide_tape_store"]; got != "jsonltape, builtin" {
		t.Errorf("provide_tape_store: %q, want jsonltape, builtin", got)
	}
	for _, h := range []string{
		"resolve_session", "load_state", "build_prompt", "run_model_stream", "save_state",
		"render_outbound", "dispatch_outbound", "register_cli_commands", "onboard_config",
		"provide_runtime_options", "on_error", "system_prompt", "provide_channels",
		"build_tape_context", "admit_message", "before_tool_call", "continue_prompt",
	} {
		if impls[h] != "builtin" {
			t.Errorf("%s: %q, want builtin", h, impls[h])
		}
	}
	if len(impls) != 18 {
		t.Errorf("bub hooks lists %d hooks, want 18:\n%s", len(impls), out)
	}
}

// modelsPlugin offers one model through provide_runtime_options.
type modelsPlugin struct{}

func (modelsPlugin) Name() string { return "models-plugin" }

func (modelsPlugin) ProvideRuntimeOptions(context.Context, hooks.RuntimeOptionsInput) (*hooks.RuntimeOptions, error) {
	return &hooks.RuntimeOptions{Models: []hooks.ModelChoice{{ID: "echo:plugin", Description: "the plugin's model"}}}, nil
}

// TestModelsListPluginOptions: `bub models` and `,model` without an
// argument list the models of every plugin in priority order, the build's
// plugin above the builtin's configured model, which stays current.
func TestModelsListPluginOptions(t *testing.T) {
	t.Setenv("BUB_HOME", t.TempDir())
	plugins := []hooks.Plugin{modelsPlugin{}}
	const want = "  echo:plugin: the plugin's model\n* echo:echo: configured model (BUB_MODEL)"
	if out := run(t, plugins, "models"); !strings.Contains(out, want) {
		t.Errorf("bub models = %q, want %q", out, want)
	}
	if out := run(t, plugins, "run", ",model"); !strings.Contains(out, want) {
		t.Errorf("bub run ,model = %q, want %q", out, want)
	}
}

// TestSkillThroughRun is behaviour check 76 through a build: `,skill`
// in `bub run` loads a workspace skill whose body's ${config.deploy.region}
// comes from <home>/config.yaml, BUB_DEPLOY_REGION overriding it, and
// whose $SKILL_DIR is the skill's directory.
func TestSkillThroughRun(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	dir := filepath.Join(ws, ".agents", "skills", "deploy-notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	skill := "---\nname: deploy-notes\ndescription: Where we deploy.\n---\nRegion ${config.deploy.region}; scripts in $SKILL_DIR.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(skill), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("deploy:\n  region: eu-west\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--home", home, "--workspace", ws, ",skill name=deploy-notes"}
	if out := run(t, nil, args...); !strings.Contains(out, "Region eu-west; scripts in "+dir+".") {
		t.Errorf("the skill from the config file = %q", out)
	}
	t.Setenv("BUB_DEPLOY_REGION", "us-east")
	if out := run(t, nil, args...); !strings.Contains(out, "Region us-east; scripts in "+dir+".") {
		t.Errorf("the skill with BUB_DEPLOY_REGION = %q", out)
	}
}

// contextPlugin answers build_tape_context with a selector that puts one
// fixed message before the turn's prompt.
type contextPlugin struct{}

func (contextPlugin) Name() string { return "context-plugin" }

func (contextPlugin) BuildTapeContext(context.Context, hooks.BuildTapeContextInput) (tape.Context, bool, error) {
	return tape.Context{Select: func(context.Context, []tape.Entry, tape.Context) ([]llm.Message, error) {
		return []llm.Message{{Role: "user", Content: llm.Text("the plugin's tape context")}}, nil
	}}, true, nil
}

// TestTapeContextPlugin: the worker's context selection is what the
// build's build_tape_context answered: the model sees the plugin's
// selected messages.
func TestTapeContextPlugin(t *testing.T) {
	fake, base := fakellm.Start(t, fakellm.Script{Steps: []fakellm.Step{{Text: "ok"}}})
	t.Setenv("BUB_MODEL", "openai:fake")
	t.Setenv("BUB_API_BASE", base)
	t.Setenv("BUB_API_KEY", "x")
	run(t, []hooks.Plugin{contextPlugin{}}, "run", "--home", t.TempDir(), "hello")
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model got %d requests, want 1", len(reqs))
	}
	var texts []string
	for _, m := range reqs[0].Messages {
		texts = append(texts, m.Role+": "+m.Content.PlainText())
	}
	if !slices.Contains(texts, "user: the plugin's tape context") {
		t.Errorf("the model's messages lack the plugin's context: %q", texts)
	}
}
