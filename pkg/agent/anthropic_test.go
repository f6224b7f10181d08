package agent_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bubbus/bub/internal/fakeanthropic"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/llm/anthropic"
	"github.com/bubbus/bub/pkg/llm/providers"
)

// anthropicModel replaces the fake OpenAI server with a fake Anthropic
// Messages API (model "anthropic:claude-x") serving steps.
func anthropicModel(fake **fakeanthropic.Server, steps ...fakeanthropic.Step) option {
	return func(e *env) {
		srv, base := fakeanthropic.Start(e.t, fakeanthropic.Script{APIKey: "sk-ant", Steps: steps})
		r, err := providers.NewRouter(llm.Config{
			Model:    "anthropic:claude-x",
			APIKeys:  map[string]llm.Secret{"anthropic": "sk-ant"},
			APIBases: map[string]string{"anthropic": base},
		}, llm.WithProviderFactory(anthropic.Name, anthropic.Factory(anthropic.WithMaxRetries(0))))
		if err != nil {
			e.t.Fatal(err)
		}
		*fake = srv
		e.srv, e.models, e.settings.Model = nil, r, "anthropic:claude-x"
	}
}

// TestAnthropicToolRun: a run on anthropic:<model> calls a tool the model
// asked for with tool_use, sends its result back as a tool_result in the
// next step's request, and finishes with the model's text; the requests carry the system prompt as
// the system field and the cache breakpoints (behaviour check 46), and the
// step's usage has the cache counts.
func TestAnthropicToolRun(t *testing.T) {
	var (
		calls countCalls
		fake  *fakeanthropic.Server
	)
	e := newEnv(t, nil, withTools(upperTool(&calls)), anthropicModel(&fake,
		fakeanthropic.Step{ToolCalls: []fakeanthropic.ToolCall{{ID: "toolu_up", Name: "text_upper", Input: `{"text":"a"}`}},
			Usage: &fakeanthropic.Usage{InputTokens: 5, OutputTokens: 3, CacheCreationInputTokens: 900}},
		fakeanthropic.Step{Text: "It is A.", Usage: &fakeanthropic.Usage{InputTokens: 7, OutputTokens: 2, CacheReadInputTokens: 900}},
	))
	out := e.mustRun("shout a")

	if out.Text != "It is A." || out.Steps != 2 {
		t.Errorf("output %+v", out)
	}
	if got := calls.get(); !reflect.DeepEqual(got, []map[string]any{{"text": "a"}}) {
		t.Errorf("tool calls %v", got)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, req := range reqs {
		var system []map[string]any
		if b, _ := json.Marshal(req.Fields["system"]); json.Unmarshal(b, &system) != nil || len(system) == 0 ||
			system[len(system)-1]["cache_control"] == nil || system[0]["text"] == "" {
			t.Errorf("request %d system = %v", i, req.Fields["system"])
		}
		tools, _ := req.Fields["tools"].([]any)
		if len(tools) == 0 || tools[len(tools)-1].(map[string]any)["cache_control"] == nil {
			t.Errorf("request %d tools = %v", i, req.Fields["tools"])
		}
		if req.Fields["cache_control"] == nil {
			t.Errorf("request %d has no top-level cache_control", i)
		}
	}
	body := string(reqs[1].Body)
	for _, want := range []string{
		`{"id":"toolu_up","input":{"text":"a"},"name":"text_upper","type":"tool_use"}`,
		`{"tool_use_id":"toolu_up","content":[{"text":"A","type":"text"}],"type":"tool_result"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("second request lacks %s: %s", want, body)
		}
	}
	var usages []*llm.Usage
	for _, f := range eventsOf[*events.LLMCallFinished](e.log) {
		usages = append(usages, f.Result.Usage)
	}
	if len(usages) != 2 || usages[0] == nil || usages[0].PromptTokensDetails.CacheWriteTokens != 900 ||
		usages[1] == nil || usages[1].PromptTokensDetails.CachedTokens != 900 || usages[1].PromptTokens != 907 {
		t.Errorf("usages %+v", usages)
	}
}

// TestAnthropicContextOverflowHandoff: Anthropic's "prompt is too long"
// error is the context overflow the agent hands off on.
func TestAnthropicContextOverflowHandoff(t *testing.T) {
	var fake *fakeanthropic.Server
	e := newEnv(t, nil, anthropicModel(&fake,
		fakeanthropic.Step{Error: &fakeanthropic.Error{Type: "invalid_request_error", Message: "prompt is too long: 208310 tokens > 200000 maximum"}},
		fakeanthropic.Step{Text: "recovered"},
	))
	out := e.mustRun("the big task")
	if out.Text != "recovered" {
		t.Errorf("output %+v", out)
	}
	var statuses []string
	for _, f := range eventsOf[*events.StepFinished](e.log) {
		statuses = append(statuses, f.Status)
	}
	if !slices.Equal(statuses, []string{"auto_handoff", "ok"}) || len(anchorsNamed(e.tape.entries(t), "auto_handoff/context_overflow")) != 1 {
		t.Errorf("step statuses %v, tape %v", statuses, kinds(e.tape.entries(t)))
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("%d requests", n)
	}
}
