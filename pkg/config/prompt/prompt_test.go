package prompt_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/config/prompt"
	"github.com/bubbus/bub/pkg/hooks"
)

var (
	qProvider = hooks.Question{Key: "provider", Prompt: "LLM provider", Default: "openrouter", Choices: []string{"openrouter", "openai"}}
	qKey      = hooks.Question{Key: "api_key", Prompt: "API key (optional)", Secret: true}
	qBase     = hooks.Question{Key: "api_base", Prompt: "API base (optional)"}
)

func TestInteractiveAnswersAndDefaults(t *testing.T) {
	var out bytes.Buffer
	p := prompt.NewInteractive(strings.NewReader("\n  sk-secret  \nhttp://x"), &out)
	ctx := t.Context()
	for _, c := range []struct {
		q    hooks.Question
		want string
	}{{qProvider, "openrouter"}, {qKey, "sk-secret"}, {qBase, "http://x"}} {
		got, err := p.Ask(ctx, c.q)
		if err != nil || got != c.want {
			t.Fatalf("Ask(%s) = %q, %v; want %q", c.q.Key, got, err, c.want)
		}
	}
	want := "LLM provider (openrouter, openai) [openrouter]: API key (optional): API base (optional): "
	if out.String() != want {
		t.Errorf("prompts = %q, want %q", out.String(), want)
	}
	if strings.Contains(out.String(), "sk-secret") {
		t.Error("the secret answer was written to the output")
	}
}

func TestInteractiveEndOfInputAborts(t *testing.T) {
	var out bytes.Buffer
	p := prompt.NewInteractive(strings.NewReader("openai\n"), &out)
	if _, err := p.Ask(t.Context(), qProvider); err != nil {
		t.Fatal(err)
	}
	_, err := p.Ask(t.Context(), qKey)
	if !errors.Is(err, prompt.ErrAborted) {
		t.Fatalf("Ask at the end of input = %v, want ErrAborted", err)
	}
	if _, err := p.Ask(t.Context(), qBase); !errors.Is(err, prompt.ErrAborted) {
		t.Errorf("Ask after an abort = %v, want ErrAborted", err)
	}
	if strings.Contains(out.String(), "API base") {
		t.Errorf("a question after the abort was shown: %q", out.String())
	}
}

func TestInteractiveCancelAborts(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	p := prompt.NewInteractive(r, io.Discard)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Ask(ctx, qKey)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, prompt.ErrAborted) || !errors.Is(err, context.Canceled) {
			t.Errorf("Ask after cancel = %v, want ErrAborted wrapping context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ask did not return after its context was cancelled")
	}
}

func TestAnswers(t *testing.T) {
	var out bytes.Buffer
	a := &prompt.Answers{Values: map[string]string{"provider": "openai", "unused": "x"}}
	ctx := t.Context()
	if got, _ := a.Ask(ctx, qProvider); got != "openai" {
		t.Errorf("answer by key = %q, want openai", got)
	}
	if got, _ := a.Ask(ctx, qBase); got != "" {
		t.Errorf("unanswered non-interactive = %q, want the default", got)
	}
	a.Fallback = prompt.NewInteractive(strings.NewReader("sk-1\n"), &out)
	if got, _ := a.Ask(ctx, qKey); got != "sk-1" {
		t.Errorf("fallback answer = %q, want sk-1", got)
	}
	if _, _ = a.Ask(ctx, qProvider); !reflect.DeepEqual(a.Asked(), []string{"provider", "api_base", "api_key"}) {
		t.Errorf("Asked = %v", a.Asked())
	}
	if !reflect.DeepEqual(a.Unused(), []string{"unused"}) {
		t.Errorf("Unused = %v, want [unused]", a.Unused())
	}
	if strings.Contains(out.String(), "LLM provider") {
		t.Error("a question answered by key was asked interactively")
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Ask(ctx, qBase); !errors.Is(err, prompt.ErrAborted) {
		t.Errorf("Ask with a cancelled context = %v, want ErrAborted", err)
	}
}

func TestParseAnswers(t *testing.T) {
	got, err := prompt.ParseAnswers(strings.NewReader("# answers\n\nmodel = openai:gpt-4o\napi_key=sk=with=equals\r\nmodel=echo:later\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"model": "echo:later", "api_key": "sk=with=equals"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseAnswers = %v, want %v", got, want)
	}
	for _, bad := range []string{"model=x\nsk-leaked-secret\n", "=value\n"} {
		_, err := prompt.ParseAnswers(strings.NewReader(bad))
		if err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("ParseAnswers(%q) = %v, want an error naming the line", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "leaked") {
			t.Errorf("the error quotes the line: %v", err)
		}
	}
}

// FuzzParseAnswers: any input parses or fails with an error, never a
// panic, and every parsed key is non-empty and trimmed.
func FuzzParseAnswers(f *testing.F) {
	for _, s := range []string{"a=b\n# c\n\nd = e\n", "=x", "no equals", "k=\x00v\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := prompt.ParseAnswers(strings.NewReader(s))
		if err != nil {
			return
		}
		for k := range got {
			if k == "" || k != strings.TrimSpace(k) {
				t.Fatalf("key %q from %q", k, s)
			}
		}
	})
}
