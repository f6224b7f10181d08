package events_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	ce "github.com/cloudevents/sdk-go/v2/event"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tools"
)

func TestToCloudEventAttributes(t *testing.T) {
	meta := events.Meta{RunID: "run-1", SessionID: "a.b c"}
	e, err := events.ToCloudEvent(&events.StepStarted{Meta: meta, Step: 3}, events.Attrs{Source: "/bub/worker/w1", Seq: 4})
	if err != nil {
		t.Fatal(err)
	}
	if e.Type() != events.TypeStepStarted || e.Subject() != "a.b c" || events.RunID(e) != "run-1" || events.Seq(e) != 4 || e.ID() == "" {
		t.Fatalf("event = %s", e)
	}
	e, err = events.ToCloudEvent(&events.StepStarted{Meta: meta}, events.Attrs{Source: "/s/x", RunID: "other", SessionID: "s2"})
	if err != nil || events.RunID(e) != "other" || events.SessionID(e) != "s2" {
		t.Fatalf("explicit attrs not kept: %v %v", e, err)
	}
}

// TestContentPolicy: the request messages of an LLM call leave the
// process only with content capture; what a call added (the model's
// answer, a finish decision's text, appended messages) always does, as a
// resumed run answers the call from it; chat.finished always carries the
// interaction.
func TestContentPolicy(t *testing.T) {
	secret := "my password is hunter2"
	req := llm.Request{Model: "m", ToolNames: []string{"bash"}, Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(secret)}}}
	call := llm.ToolCall{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: `{"cmd":"` + secret + `"}`}}
	private := []events.Event{
		&events.LLMCallStarted{Request: req},
		&events.LLMCallFinished{Request: req, Result: llm.Result{ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: "{}"}}}}},
	}
	for _, ev := range private {
		off, err := events.ToCloudEvent(ev, events.Attrs{Source: "/s/x"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(off.Data()), "hunter2") {
			t.Errorf("%s leaks request messages without capture: %s", off.Type(), off.Data())
		}
	}
	on, err := events.Codec{CaptureContent: true}.ToCloudEvent(private[0], events.Attrs{Source: "/s/x"})
	if err != nil || !strings.Contains(string(on.Data()), "hunter2") {
		t.Errorf("llm_call.started lacks its messages with capture: %s %v", on.Data(), err)
	}
	added := []events.Event{
		&events.LLMCallStarted{Request: llm.Request{Model: "m"}, Decision: llm.Finish(secret)},
		&events.LLMCallFinished{Request: llm.Request{Model: "m"}, Result: llm.Result{Text: secret, ToolCalls: []llm.ToolCall{call}}},
		&events.MessagesPending{Messages: req.Messages},
	}
	for _, ev := range added {
		off, err := events.ToCloudEvent(ev, events.Attrs{Source: "/s/x"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(off.Data()), "hunter2") {
			t.Errorf("%s lacks what the call added (a resume needs it): %s", off.Type(), off.Data())
		}
	}
	started, _ := events.ToCloudEvent(added[0], events.Attrs{Source: "/s/x"})
	p := decodeAs[*events.LLMCallStartedData](t, started)
	if p.Model != "m" || p.Decision == nil || p.Decision.Action != "finish" || p.Decision.Text != secret {
		t.Errorf("llm_call.started without capture = %+v", p)
	}
	finished, _ := events.ToCloudEvent(added[1], events.Attrs{Source: "/s/x"})
	if f := decodeAs[*events.LLMCallFinishedData](t, finished); len(f.ToolCallNames) != 1 || f.ToolCallNames[0] != "bash" || f.Text != secret || len(f.ToolCalls) != 1 {
		t.Errorf("llm_call.finished without capture = %+v", f)
	}
	chat, _ := events.ToCloudEvent(&events.ChatFinished{NewMessages: req.Messages}, events.Attrs{Source: "/s/x"})
	if !strings.Contains(string(chat.Data()), "hunter2") {
		t.Errorf("chat.finished must always carry the interaction: %s", chat.Data())
	}
}

// TestChatFinishedRecordShape pins the record_chat distinctions the tape
// depends on: null vs empty tool results, null vs empty response text,
// errors as {kind, message, details}, and the context error not repeated.
func TestChatFinishedRecordShape(t *testing.T) {
	empty := ""
	ctxErr := bub.Errorf(bub.KindNotFound, "no anchor")
	toolErr := &bub.Error{Kind: bub.KindTool, Message: "failed", Details: map[string]any{"error": "x"}}
	tests := []struct {
		name string
		ev   *events.ChatFinished
		want map[string]any
	}{
		{"no tools, no text", &events.ChatFinished{},
			map[string]any{"tool_results": nil, "response_text": nil}},
		{"tools ran, none returned", &events.ChatFinished{ToolResults: []any{}},
			map[string]any{"tool_results": []any{}, "response_text": nil}},
		{"empty answer", &events.ChatFinished{ResponseText: &empty},
			map[string]any{"tool_results": nil, "response_text": ""}},
		{"tool error result", &events.ChatFinished{ToolResults: []any{"ok", toolErr}},
			map[string]any{"tool_results": []any{"ok", map[string]any{"kind": "tool", "message": "failed", "details": map[string]any{"error": "x"}}}, "response_text": nil}},
		{"context error is not repeated", &events.ChatFinished{ContextErr: ctxErr, Err: ctxErr},
			map[string]any{"tool_results": nil, "response_text": nil, "context_error": map[string]any{"kind": "not_found", "message": "no anchor"}}},
		{"other errors become unknown", &events.ChatFinished{Err: errors.New("plain")},
			map[string]any{"tool_results": nil, "response_text": nil, "error": map[string]any{"kind": "unknown", "message": "plain"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := events.ToCloudEvent(tc.ev, events.Attrs{Source: "/s/x"})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(e.Data(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("data = %s", e.Data())
			}
		})
	}
}

func TestToolCallFinishedPayload(t *testing.T) {
	ev := &events.ToolCallFinished{
		Call:   tools.Call{Tool: "fs_read", CallID: "c1", Arguments: map[string]any{"path": "a"}},
		Result: &tools.Result{Result: "text", DurationMS: 7, Err: bub.Errorf(bub.KindTool, "partial")},
	}
	e, err := events.ToCloudEvent(ev, events.Attrs{Source: "/s/x"})
	if err != nil {
		t.Fatal(err)
	}
	p := decodeAs[*events.ToolCallFinishedData](t, e)
	if p.Tool != "fs_read" || p.CallID != "c1" || p.Result != "text" || p.DurationMS != 7 || p.Error == nil || p.Error.Kind != "tool" {
		t.Fatalf("payload = %+v", p)
	}
}

// reviewed is a registered custom event.
type reviewed struct {
	events.Meta
	OrderID string `json:"order_id"`
	Score   int    `json:"score"`
}

// localOnly is a custom event that is never registered.
type localOnly struct{ events.Meta }

func TestRegistry(t *testing.T) {
	var reg events.Registry
	if err := events.RegisterType[*reviewed](&reg, "com.example.order.reviewed.v1"); err != nil {
		t.Fatal(err)
	}
	codec := events.Codec{Registry: &reg}
	e, err := codec.ToCloudEvent(&reviewed{Meta: events.Meta{SessionID: "s", RunID: "r", State: bub.NewState(nil)}, OrderID: "A1", Score: 5},
		events.Attrs{Source: "/s/x"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Type() != "com.example.order.reviewed.v1" || string(e.Data()) != `{"order_id":"A1","score":5}` || events.RunID(e) != "r" {
		t.Fatalf("custom event = %s", e)
	}
	if got := events.SubjectName(e.Type()); got != "com.example.order.reviewed" {
		t.Fatalf("SubjectName = %q", got)
	}
	v, err := codec.DecodePayload(e)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := v.(*reviewed); !ok || r.OrderID != "A1" || r.Score != 5 {
		t.Fatalf("decoded %#v", v)
	}
	if _, err := events.DecodePayload(e); !errors.Is(err, events.ErrUnknownType) {
		t.Fatalf("built-in-only DecodePayload of a custom type: %v", err)
	}
	if _, err := codec.ToCloudEvent(&localOnly{}, events.Attrs{Source: "/s/x"}); !errors.Is(err, events.ErrUnregistered) {
		t.Fatalf("unregistered event: %v", err)
	}

	bad := []struct {
		name string
		err  error
		reg  func() error
	}{
		{"duplicate Go type", events.ErrDuplicateType, func() error { return events.RegisterType[*reviewed](&reg, "com.example.other.v1") }},
		{"duplicate CE type", events.ErrDuplicateType, func() error { return events.RegisterType[*localOnly](&reg, "com.example.order.reviewed.v1") }},
		{"reserved prefix", events.ErrInvalidType, func() error { return events.RegisterType[*localOnly](&reg, "dev.bub.local.v1") }},
		{"no version", events.ErrInvalidType, func() error { return events.RegisterType[*localOnly](&reg, "com.example.local") }},
		{"subject wildcard", events.ErrInvalidType, func() error { return events.RegisterType[*localOnly](&reg, "com.example.*.v1") }},
		{"upper case", events.ErrInvalidType, func() error { return events.RegisterType[*localOnly](&reg, "com.Example.local.v1") }},
		{"built-in event", events.ErrInvalidType, func() error { return events.RegisterType[*events.RunStarted](&reg, "com.example.run.v1") }},
		{"not a struct pointer", events.ErrInvalidType, func() error { return events.RegisterType[events.AgentEvent](&reg, "com.example.any.v1") }},
	}
	for _, tc := range bad {
		if err := tc.reg(); !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestDecodePayloadErrors(t *testing.T) {
	e, err := events.New("com.example.unknown.v1", events.Attrs{Source: "/s/x"}, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.DecodePayload(e); !errors.Is(err, events.ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
	e, err = events.New(events.TypeStepStarted, events.Attrs{Source: "/s/x"}, map[string]any{"step": "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.DecodePayload(e); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("bad data: %v", err)
	}
}

func decodeAs[T any](t *testing.T, e ce.Event) T {
	t.Helper()
	v, err := events.DecodePayload(e)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := v.(T)
	if !ok {
		t.Fatalf("DecodePayload(%s) = %T", e.Type(), v)
	}
	return p
}
