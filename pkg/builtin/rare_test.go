package builtin_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/builtin"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
)

// TestBuildPromptDateLineOnlyWithContext (failed before its fix): bub-behaviour.md §3,
// builtin build_prompt: "Otherwise text = "<context_str>\n---Date: <now
// local ISO-8601 with offset, seconds precision>---\n<content>" (the
// prefix only when context_str is non-empty)". Python Bub
// (bub/builtin/hook_impl.py):
//
//	context_prefix = f"{context}\n---Date: {now}---\n" if context else ""
//	text = f"{context_prefix}{content}"
//
// i.e. the whole prefix — context line AND date line — is left out when
// the message has no context string.
//
// Sequence: an inbound with no context (no channel, no chat id, no
// context keys — a mapping-like envelope; Normalize adds nothing then), or
// a context holding only "_"-prefixed runtime keys, goes through
// build_prompt.
//
// Expected: the prompt is the bare content ("hello"). A consequence:
// content " ,help" (leading space, so build_prompt does not mark it a
// command) stays " ,help", whose trimmed form starts with "," — the agent
// then runs it as a comma command, as Python does (§5.2 step 5).
// Before the fix: the Go builtin always prepended "---Date: …---\n", so the model
// gets a date line Bub would not send, and " ,help" becomes a model
// prompt instead of a command.
func TestBuildPromptDateLineOnlyWithContext(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name string
		msg  envelope.Envelope
		want string
	}{
		{"no context", envelope.Envelope{Content: "hello"}, "hello"},
		{"only runtime keys", envelope.Envelope{Content: "hello", Context: envelope.NewContext("_x", "y")}, "hello"},
		{"leading-space comma stays a command line", envelope.Envelope{Content: " ,help"}, " ,help"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, builtin.Options{Now: func() time.Time { return now }})
			msg := tt.msg
			got, ok, err := p.BuildPrompt(t.Context(), hooks.BuildPromptInput{Message: &msg, SessionID: "s", State: bub.NewState(nil)})
			if err != nil || !ok {
				t.Fatalf("BuildPrompt = %v, %v", ok, err)
			}
			if !reflect.DeepEqual(got, llm.Text(tt.want)) {
				t.Errorf("prompt = %q, want %q", got.Text, tt.want)
			}
		})
	}
}
