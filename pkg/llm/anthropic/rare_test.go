package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/bubbus/bub/internal/fakeanthropic"
	"github.com/bubbus/bub/pkg/llm"
)

// TestTruncatedToolInputIsNotEmptied (failed before its fix): a tool_use block cut off by
// max_tokens must not turn into a call with arguments "{}".
//
// Sequence: the model starts a tool_use block for "bash", streams the
// input_json_delta pieces of `{"cmd": "rm -rf /tmp/scratch/` and runs out
// of tokens: content_block_stop, message_delta stop_reason "max_tokens",
// message_stop. The SDK's Message.Accumulate (refreshContentBlockRaw, at
// content_block_stop and message_stop) replaces the non-JSON input with
// `{}`, and response() reports a complete-looking call bash({}).
//
// Expected (bub-behaviour.md §5.5 step 7 and behaviour check 8): malformed,
// non-object tool-call arguments fail the step with INVALID_INPUT
// "Expected a function tool call with JSON object arguments." — so the
// provider must hand the arguments on as they came (not valid JSON), as
// the OpenAI-compatible provider does for finish_reason "length". Before the fix a
// truncated call is executed with empty arguments instead.
func TestTruncatedToolInputIsNotEmptied(t *testing.T) {
	const cut = `{"cmd": "rm -rf /tmp/scratch/`
	_, base := fakeanthropic.Start(t, fakeanthropic.Script{Steps: []fakeanthropic.Step{{
		ToolCalls:  []fakeanthropic.ToolCall{{ID: "toolu_cut", Name: "bash", Input: cut}},
		StopReason: "max_tokens",
	}}})
	resp, _ := collect(t, newProvider(t, base), userCall("clean up"))
	if len(resp.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v, want the one cut-off call", resp.ToolCalls)
	}
	args := resp.ToolCalls[0].Function.Arguments
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) == nil {
		t.Fatalf("arguments of a tool call cut off by max_tokens = %q (a valid JSON object the tool will run with); want the truncated %q so the step fails as malformed", args, cut)
	}
}

// TestThinkingOffWhenToolLoopContinuesWithPrompt (failed before its fix): the guard that
// keeps extended thinking off for a tool loop whose thinking blocks the
// provider does not hold must also hold when the agent appends its
// continue prompt after the tool results — which Bub's agent loop always
// does (pkg/agent/step.go appends {role: user, content: prompt} to every
// step's messages; step 2+ carries DefaultContinuePrompt).
//
// Sequence: a provider that never saw the first answer (worker restarted,
// another worker resumed the run, cache evicted) gets, with reasoning
// effort "medium", the messages user, assistant(tool_calls toolu_t), tool
// result, user "Continue the task until all targets are completed.".
// canThink looks only at the last message: a user message, so "not in a
// tool loop", and thinking is turned on. The API refuses this request
// ("When thinking is enabled, a final assistant message must start with a
// thinking block (preceding the lastmost set of tool_use and tool_result
// blocks)").
//
// Expected (anthropic Provider.Complete doc: "Thinking stays off for a
// call that continues a tool loop whose thinking blocks this provider does
// not hold"): no thinking field in the request, exactly as for the same
// messages without the trailing continue prompt (TestThinking's third call).
func TestThinkingOffWhenToolLoopContinuesWithPrompt(t *testing.T) {
	fake, base := fakeanthropic.Start(t, fakeanthropic.Script{})
	call := userCall("time?")
	call.MaxTokens = 4000
	call.ReasoningEffort = "medium"
	call.Messages = append(call.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_t", Type: "function", Function: llm.FunctionCall{Name: "now", Arguments: "{}"}}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_t", Content: llm.Text("12:00")},
		llm.Message{Role: llm.RoleUser, Content: llm.Text("Continue the task until all targets are completed.")},
	)
	collect(t, newProvider(t, base), call)
	if req := fake.Requests()[0]; req.Fields["thinking"] != nil {
		t.Fatalf("thinking on for a continued tool loop without its thinking blocks (the API refuses it): %s", req.Body)
	}
}
