package toolkit

import (
	"testing"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/tools"
)

func TestHelp(t *testing.T) {
	e := newEnv(t)
	if got := e.run(t, "help", nil, nil); got != HelpText {
		t.Fatalf("help = %q", got)
	}
}

// TestStateTools covers model and reasoning_effort (behaviour check 64:
// the value is trimmed, whitespace-only input fails).
func TestStateTools(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		tool, arg, value string
		key              string
		stored, reply    string
		err              string
	}{
		{tool: "reasoning_effort", arg: "reasoning_effort", value: " high ", key: bub.StateReasoningEffort, stored: "high", reply: "Session reasoning effort set to high (applies from the next turn)."},
		{tool: "reasoning_effort", arg: "reasoning_effort", value: "  \t", key: bub.StateReasoningEffort, err: "reasoning_effort must not be empty"},
		{tool: "model", arg: "model_id", value: "openai:gpt-4o", key: bub.StateModel, stored: "openai:gpt-4o", reply: "Session model set to openai:gpt-4o (applies from the next turn)."},
		{tool: "model", arg: "model_id", value: " ", key: bub.StateModel, err: "model_id must not be empty"},
	}
	for _, tt := range tests {
		state := bub.NewState(nil)
		res, err := e.call(t.Context(), t, tt.tool, &tools.Context{State: state}, map[string]any{tt.arg: tt.value})
		got, set := state.Get(tt.key)
		if tt.err != "" {
			if err == nil || err.Kind != bub.KindTool || err.Details["error"] != tt.err || set {
				t.Errorf("%s %q: error = %v %v, state set %v", tt.tool, tt.value, err, details(err), set)
			}
			continue
		}
		if err != nil || res != tt.reply || got != tt.stored {
			t.Errorf("%s %q = %v, %v; state %v", tt.tool, tt.value, res, err, got)
		}
	}
	if _, err := e.call(t.Context(), t, "model", &tools.Context{}, map[string]any{"model_id": "x"}); err == nil || err.Details["error"] != errNoState.Error() {
		t.Errorf("model without state = %v", err)
	}
}
