package toolkit

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func TestRegister(t *testing.T) {
	e := newEnv(t)
	var all []string
	for _, tl := range e.reg.All() {
		all = append(all, tl.Name)
	}
	wantAll := []string{"bash", "bash.kill", "bash.output", "fs.edit", "fs.read", "fs.write", "help", "model", "quit", "reasoning_effort",
		"skill", "subagent", "tape.anchors", "tape.handoff", "tape.info", "tape.reset", "tape.search", "web.fetch"}
	if !slices.Equal(all, wantAll) {
		t.Errorf("registered %v, want %v", all, wantAll)
	}
	// Bub's model-visible set, less spill_read (not built).
	wantModel := []string{"bash", "bash_kill", "bash_output", "fs_edit", "fs_read", "fs_write", "skill", "subagent",
		"tape_anchors", "tape_handoff", "tape_info", "tape_reset", "tape_search", "web_fetch"}
	if got := e.reg.ModelNames(); !slices.Equal(got, wantModel) {
		t.Errorf("model-visible tools %v, want %v", got, wantModel)
	}

	if err := Register(e.reg, Options{Shells: e.shells}); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("second Register = %v, want duplicate errors", err)
	}
	var reg tools.Registry
	if err := Register(&reg, Options{}); err == nil || len(reg.All()) != 0 {
		t.Errorf("Register without Shells = %v, registered %d", err, len(reg.All()))
	}
}

func TestPrompt(t *testing.T) {
	e := newEnv(t)
	prompt := tools.RenderPrompt(e.reg.All())
	for _, line := range []string{
		"- bash(cmd, cwd?, timeout_seconds?, background?): Run a shell command.",
		"- bash_output(shell_id, offset?, limit?): Read buffered output",
		"- bash_kill(shell_id): Terminate a background shell process.",
		"- fs_read(path, offset?, limit?): Read a text file",
		"- fs_write(path, content): Write content to a text file.",
		"- fs_edit(path, old, new, start?): Edit a text file",
		"- web_fetch(url, headers?, timeout?): Fetch(GET)",
		"- skill(name?): Load the skill content by name.",
	} {
		if !strings.Contains(prompt, "\n"+line) {
			t.Errorf("tools prompt lacks %q:\n%s", line, prompt)
		}
	}
	for _, hidden := range []string{"help", "quit", "model", "reasoning_effort"} {
		if strings.Contains(prompt, "- "+hidden+"(") {
			t.Errorf("tools prompt shows hidden tool %s", hidden)
		}
	}
}

// TestCommands runs comma commands end to end: resolve, then invoke.
func TestCommands(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.ws, "README.md"), "r0\nr1\nr2")
	tests := []struct {
		text, want string
	}{
		{text: ",fs.read README.md 1", want: "r1\nr2"},
		{text: ",fs.read path=README.md offset=2", want: "r2"},
		{text: ",fs.write path=tmp.txt content='hello world'", want: "wrote: " + filepath.Join(e.ws, "tmp.txt")},
		{text: ",fs.edit path=tmp.txt old=hello new=bye", want: "edited: " + filepath.Join(e.ws, "tmp.txt")},
		{text: ",bash cmd='cat tmp.txt' timeout_seconds=5", want: "bye world"},
		{text: ",echo 'a  b' | tr a x", want: "x  b"},
		{text: ",help", want: HelpText},
		{text: ",reasoning_effort high", want: "Session reasoning effort set to high (applies from the next turn)."},
	}
	for _, tt := range tests {
		line, _ := tools.CommandLine(tt.text)
		inv, err := tools.ResolveCommand(e.reg, line)
		if err != nil {
			t.Errorf("%s: %v", tt.text, err)
			continue
		}
		tc := e.tc("s")
		tc.State = bub.NewState(nil)
		res, berr := tools.Invoke(t.Context(), inv.Tool, tc, inv.Args)
		if berr != nil || tools.RenderResult(res) != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.text, res, berr, tt.want)
		}
	}

	// A model-facing alias is not a command name: bash runs the line.
	inv, err := tools.ResolveCommand(e.reg, "fs_read README.md")
	if err != nil || inv.Tool.Name != "bash" {
		t.Fatalf("ResolveCommand(fs_read) = %v, %v", inv.Tool.Name, err)
	}
	_, berr := tools.Invoke(t.Context(), inv.Tool, e.tc("s"), inv.Args)
	if berr == nil || berr.Details["exit_code"] != 127 || !strings.Contains(berr.Details["output"].(string), "fs_read: command not found") {
		t.Fatalf("bash fs_read = %v %v", berr, details(berr))
	}
}

// TestEffectClasses pins the effect class every builtin tool declares:
// none is left to the irreversible default.
func TestEffectClasses(t *testing.T) {
	want := map[string]tools.Effect{
		"bash": tools.EffectIrreversible, "bash.output": tools.EffectReadOnly, "bash.kill": tools.EffectIdempotent,
		"fs.read": tools.EffectReadOnly, "fs.write": tools.EffectIdempotent, "fs.edit": tools.EffectIrreversible,
		"help": tools.EffectReadOnly, "model": tools.EffectIdempotent, "reasoning_effort": tools.EffectIdempotent, "quit": tools.EffectIdempotent,
		"skill": tools.EffectReadOnly, "subagent": tools.EffectIrreversible,
		"tape.info": tools.EffectReadOnly, "tape.search": tools.EffectReadOnly, "tape.anchors": tools.EffectReadOnly,
		"tape.reset": tools.EffectIrreversible, "tape.handoff": tools.EffectIrreversible,
		"web.fetch": tools.EffectReadOnly,
	}
	e := newEnv(t)
	for _, tl := range e.reg.All() {
		if tl.Effect == "" {
			t.Errorf("%s declares no effect class", tl.Name)
		}
		if tl.Effect != want[tl.Name] {
			t.Errorf("%s effect = %q, want %q", tl.Name, tl.Effect, want[tl.Name])
		}
	}
}
