package recording_test

import (
	"strings"
	"testing"

	"github.com/bubbus/bub/pkg/agent/recording"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

// A run interrupted during step 2's tool call: step 1 complete, step 2's
// model call answered, tool a finished, tool b only started.
func interruptedRun() []recording.Event {
	evs := []any{
		&events.RunStartedData{Model: "openai:fake"},
		&events.StepStartedData{Step: 1},
		&events.MessagesPendingData{Step: 1},
		&events.LLMCallStartedData{Model: "openai:fake"},
		&events.LLMCallFinishedData{Text: "one"},
		&events.ChatFinishedData{},
		&events.MessagesPendingData{Step: 1, AtStepEnd: true},
		&events.StepFinishedData{Step: 1, Status: events.StepContinue, NextPrompt: "go on"},
		&events.StepStartedData{Step: 2},
		&events.LLMCallStartedData{Model: "openai:fake"},
		&events.LLMCallFinishedData{ToolCalls: []llm.ToolCall{{ID: "a"}, {ID: "b"}}},
		&events.ToolCallStartedData{Tool: "fs.read", CallID: "a"},
		&events.ToolCallStartedData{Tool: "fs.edit", CallID: "b", Decision: &tools.Decision{Action: tools.ActionProceed}},
		&events.ToolCallFinishedData{Tool: "fs.read", CallID: "a", Result: "text"},
	}
	out := make([]recording.Event, len(evs))
	for i, p := range evs {
		out[len(evs)-1-i] = recording.Event{Seq: int64(i + 1), Payload: p} // any order
	}
	return out
}

func TestNewIndexesStepsAndToolCalls(t *testing.T) {
	r, err := recording.New("run-1", interruptedRun())
	if err != nil {
		t.Fatal(err)
	}
	if r.Started == nil || r.Finished != nil || r.LastSeq() != 14 {
		t.Fatalf("run %+v, want started, unfinished, 14 events", r)
	}
	s1, s2 := r.Step(1), r.Step(2)
	if !s1.CallDone() || s1.LLMFinished.Text != "one" || s1.Finished.NextPrompt != "go on" || s1.Pending == nil || s1.PendingEnd == nil || s1.Chat == nil {
		t.Errorf("step 1 = %+v", s1)
	}
	if !s2.CallDone() || s2.Chat != nil || s2.Finished != nil {
		t.Errorf("step 2 = %+v, want its call answered and nothing after its tools", s2)
	}
	if a := r.Tool(2, "a"); a == nil || a.Finished == nil || a.Finished.Result != "text" {
		t.Errorf("tool a = %+v, want finished", a)
	}
	if b := r.Tool(2, "b"); b == nil || b.Finished != nil || b.Started.Decision == nil {
		t.Errorf("tool b = %+v, want started with its decision, not finished", b)
	}
	if r.Tool(1, "a") != nil || r.Step(3) != nil || r.Step(3).CallDone() {
		t.Error("a step or call the run never recorded is not nil")
	}
	var none *recording.Run
	if none.Step(1) != nil || none.Tool(1, "a") != nil {
		t.Error("a nil recording answers nothing")
	}
}

// A recording with a hole cannot answer the run: what the hole held is
// unknown.
func TestNewRefusesAGap(t *testing.T) {
	evs := interruptedRun()
	evs = append(evs[:3], evs[4:]...) // drop one event
	if _, err := recording.New("run-1", evs); err == nil || !strings.Contains(err.Error(), "was due") {
		t.Fatalf("err = %v, want the gap reported", err)
	}
}

func TestNewRefusesAStepEventOutsideAStep(t *testing.T) {
	_, err := recording.New("run-1", []recording.Event{{Seq: 1, Type: events.TypeLLMCallStarted, Payload: &events.LLMCallStartedData{}}})
	if err == nil {
		t.Fatal("an llm_call.started before any step.started was accepted")
	}
}
