package events_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
	"github.com/bubbus/bub/pkg/tools"
)

var update = flag.Bool("update", false, "rewrite the golden examples in docs/events")

const docsDir = "../../docs/events"

// sampleMeta is the run every golden example belongs to.
var sampleMeta = events.Meta{RunID: "run-0199a1b2-0000-7000-8000-000000000001", SessionID: "telegram:42"}

// sampleAttrs returns fixed attributes for the n-th example.
func sampleAttrs(n int) events.Attrs {
	return events.Attrs{
		ID:          fmt.Sprintf("0199a1b2-c3d4-7e5f-8a9b-%012d", n),
		Source:      events.Source("worker", "w1"),
		Seq:         int64(n),
		Time:        time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

// samples returns, per CloudEvent type, an example event with every field
// set that its default encoding publishes.
func samples() map[string]func(events.Attrs) (ce.Event, error) {
	m := sampleMeta
	text := "The tests pass."
	usage := &llm.Usage{PromptTokens: 1200, CompletionTokens: 80, TotalTokens: 1280, PromptTokensDetails: &llm.PromptTokensDetails{CachedTokens: 1024}}
	toolCall := llm.ToolCall{ID: "call_1", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: `{"cmd":"go test ./..."}`}}
	toolErr := &bub.Error{Kind: bub.KindTool, Message: "Tool 'bash' execution failed.", Details: map[string]any{"error": "exit status 1"}}
	conv := func(ev events.Event) func(events.Attrs) (ce.Event, error) {
		return func(a events.Attrs) (ce.Event, error) { return events.ToCloudEvent(ev, a) }
	}
	direct := func(typ string, data any) func(events.Attrs) (ce.Event, error) {
		return func(a events.Attrs) (ce.Event, error) {
			a.RunID, a.SessionID = m.RunID, m.SessionID
			return events.New(typ, a, data)
		}
	}
	env := envelope.Envelope{
		ID: "0199a1b2-0000-7000-8000-0000000000e1", Content: "run the tests", Channel: "telegram", ChatID: "42",
		SessionID: "telegram:42", Context: envelope.NewContext("channel", "$telegram", "chat_id", "42"),
		Media: []envelope.Media{{Type: "image", MimeType: "image/png", Filename: "screen.png", URL: "https://example.com/screen.png"}},
		Kind:  envelope.KindNormal, OutputChannel: "telegram", IsActive: true,
	}
	out := env
	out.ID, out.Content, out.Media, out.InReplyTo = "0199a1b2-0000-7000-8000-0000000000e2", "All 42 tests pass.", nil, env.ID
	return map[string]func(events.Attrs) (ce.Event, error){
		events.TypeEnvelopeInbound:  direct(events.TypeEnvelopeInbound, env),
		events.TypeEnvelopeOutbound: direct(events.TypeEnvelopeOutbound, out),
		events.TypeRunStarted: conv(&events.RunStarted{Meta: m, Prompt: llm.Text("run the tests"), Model: "openai:gpt-4o-mini",
			Metadata: events.RunMetadata{Answers: events.Answers{EnvelopeID: env.ID, InboundSeq: 7, Delivery: 1}, AllowedTools: []string{"bash", "fs.read"}}}),
		events.TypeRunFinished: conv(&events.RunFinished{Meta: m, Status: events.RunError, Steps: 2, DurationMS: 5120,
			Err: bub.Errorf(bub.KindProvider, "rate limited")}),
		events.TypeStepStarted: conv(&events.StepStarted{Meta: m, Step: 1, Prompt: llm.Text("run the tests")}),
		events.TypeStepFinished: conv(&events.StepFinished{Meta: m, Step: 1, Status: events.StepContinue, ElapsedMS: 2300,
			NextPrompt: "Continue the task.", Err: bub.Errorf(bub.KindTemporary, "retrying")}),
		events.TypeMessagesPending: conv(&events.MessagesPending{Meta: m, Step: 2, AtStepEnd: true,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text("also run vet")}}}),
		events.TypeLLMCallStarted: conv(&events.LLMCallStarted{Meta: m, Request: llm.Request{
			RunID: m.RunID, Model: "openai:gpt-4o-mini", MaxTokens: 1024, ToolNames: []string{"bash", "fs_read"},
			Messages: []llm.Message{{Role: llm.RoleSystem, Content: llm.Text("You are Bub.")}, {Role: llm.RoleUser, Content: llm.Text("run the tests")}},
		}, Decision: llm.Finish("cached")}),
		events.TypeLLMCallFinished: conv(&events.LLMCallFinished{Meta: m, Request: llm.Request{Model: "openai:gpt-4o-mini"},
			Result: llm.Result{RunID: m.RunID, ToolCalls: []llm.ToolCall{toolCall}, Usage: usage, DurationMS: 850,
				Err: bub.Errorf(bub.KindProvider, "stream interrupted")}}),
		events.TypeToolCallStarted: conv(&events.ToolCallStarted{Meta: m,
			Call:     tools.Call{RunID: m.RunID, Tool: "bash", Arguments: map[string]any{"cmd": "rm -rf /"}, CallID: "call_1"},
			Decision: tools.Deny("Destructive commands need approval.")}),
		events.TypeToolCallFinish: conv(&events.ToolCallFinished{Meta: m,
			Call:   tools.Call{RunID: m.RunID, Tool: "bash", Arguments: map[string]any{"cmd": "go test ./..."}, CallID: "call_1"},
			Result: &tools.Result{RunID: m.RunID, Tool: "bash", Result: "ok  \tgithub.com/x/y\t0.4s", Err: toolErr, DurationMS: 410}}),
		events.TypeChatFinished: conv(&events.ChatFinished{Meta: m,
			SystemPrompt: "You are Bub.\n\n<available_tools>\n- bash(cmd)\n</available_tools>",
			ContextErr:   bub.Errorf(bub.KindNotFound, "no anchor"),
			NewMessages:  []llm.Message{{Role: llm.RoleUser, Content: llm.Text("run the tests")}},
			ToolCalls:    []llm.ToolCall{toolCall},
			ToolResults:  []any{"ok", toolErr},
			Err:          bub.Errorf(bub.KindTool, "one tool failed"),
			ResponseText: &text, Provider: "openai", Model: "gpt-4o-mini", Usage: usage}),
		events.TypeCommandFinished: conv(&events.CommandFinished{Meta: m, Command: "tape.info", Name: "tape.info",
			Status: events.CommandError, Output: "[tool] no tape", ElapsedMS: 4, Err: bub.Errorf(bub.KindTool, "no tape"),
			Answers: &events.Answers{EnvelopeID: env.ID, InboundSeq: 7, Delivery: 1}}),
		events.TypeCommandChanged: conv(&events.CommandChanged{Meta: m, ID: env.ID, Command: "tape.info", Status: events.StatusStarted}),
		events.TypeWorkChanged:    conv(&events.WorkChanged{Meta: m, ID: env.ID, Channel: "telegram", Status: events.StatusQueued}),
		events.TypePromptChanged: conv(&events.PromptChanged{Meta: m, ID: env.ID, Channel: "telegram", Status: events.StatusStarted,
			Prompt: llm.Content{Parts: []llm.Part{{Type: "text", Text: "what is this?"}, {Type: "image_url", ImageURL: &llm.URLPart{URL: "https://example.com/a.png"}}}}}),
		events.TypeHookDecision: conv(&events.HookDecision{Meta: m, Plugin: "policy", Remote: true, Hook: "before_tool_call",
			Action: "deny", Detail: map[string]any{"tool": "bash"}, DurationMS: 3, Err: bub.Errorf(bub.KindTemporary, "slow")}),
		// Built: a healthy golden turn is answered before its deadline.
		events.TypeApprovalTimedOut: conv(&events.ApprovalTimedOut{Meta: m, ID: "5d1f0b6a9c2e4f8a7b3c1d0e9f8a7b6c",
			Call:    tools.Call{RunID: m.RunID, Tool: "bash", Arguments: map[string]any{"cmd": "rm -rf /"}, CallID: "call_1"},
			Default: tools.ActionDeny, Deadline: time.Date(2026, 1, 2, 4, 4, 5, 0, time.UTC)}),
		events.TypeTapeEvent: conv(&events.TapeEventRecorded{Meta: m, Name: "order.reviewed", Data: map[string]any{"order_id": "A123"}}),
		events.TypeTurnError: conv(&events.TurnError{Meta: m, Stage: "turn", EnvelopeID: env.ID, Err: bub.Errorf(bub.KindConfig, "no model configured")}),
		// As the admission gate publishes it: before any run, with the id
		// "<envelope id>/dropped".
		events.TypeTurnDropped: func(a events.Attrs) (ce.Event, error) {
			a.ID, a.Seq, a.Source, a.SessionID = env.ID+"/dropped", 0, events.Source("worker", "w1"), m.SessionID
			return events.New(events.TypeTurnDropped, a, events.TurnDroppedData{EnvelopeID: env.ID, Reason: "admit_message"})
		},
		// As the worker publishes it: before the turn's first stage, so of
		// no run.
		events.TypeTapeStale: func(a events.Attrs) (ce.Event, error) {
			a.Seq, a.SessionID = 0, m.SessionID
			return events.New(events.TypeTapeStale, a, events.TapeStaleData{Tape: "3f2a9c__b81e07", Watermark: 120, Committed: 117, WaitedMS: 2000})
		},
		events.TypeDeadLetter: direct(events.TypeDeadLetter, events.DeadLetterData{Reason: "undecodable", Error: "not a CloudEvent",
			Subject: "bub.inbound.telegram", Stream: "BUB_INBOUND", StreamSeq: 7, Deliveries: 1}),
	}
}

// TestGoldenExamples regenerates (with -update) or compares the golden
// example of every type, and checks each against the CloudEvent schema and
// its payload schema, decoded by Decode and DecodePayload.
func TestGoldenExamples(t *testing.T) {
	schemas := loadSchemas(t, docsDir)
	all := samples()
	for _, typ := range realTypes {
		delete(all, typ)
	}
	if got, want := slices.Sorted(slices.Values(slices.Concat(slices.Collect(maps.Keys(all)), realTypes))), events.Types(); !slices.Equal(got, want) {
		t.Fatalf("real and built examples cover %v\nwant every type %v", got, want)
	}
	real := captureReal(t)
	for i, typ := range events.Types() {
		name := events.SubjectName(typ)
		t.Run(name, func(t *testing.T) {
			var body []byte
			if sample, ok := all[typ]; ok {
				e, err := sample(sampleAttrs(i + 1))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = events.Encode(e); err != nil {
					t.Fatal(err)
				}
			} else if body = real[typ]; body == nil {
				t.Fatalf("the captured turns published no %s event", typ)
			} else {
				body = normalise(t, body, i+1)
			}
			want := exampleJSON(t, body)
			compareGolden(t, name, want)
			checkExample(t, schemas, name, typ, want)
		})
	}
	for _, c := range []struct {
		typ   string
		check func(t *testing.T, raw []byte)
	}{{events.TypeTapeEntry, checkTapeEntry}, {events.TypeTapeIndex, checkTapeIndex}} {
		name := events.SubjectName(c.typ)
		t.Run(name, func(t *testing.T) {
			raw := real[c.typ]
			if raw == nil {
				t.Fatalf("the captured turns stored no %s", c.typ)
			}
			c.check(t, raw)
			want := exampleJSON(t, normalise(t, raw, 0))
			compareGolden(t, name, want)
			for _, err := range schemas.validate("cloudevent.schema.json", want) {
				t.Errorf("CloudEvent attributes: %v", err)
			}
			e, err := events.Decode(map[string][]string{"Content-Type": {events.ContentTypeStructured}}, want)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			for _, err := range schemas.validate(name+".schema.json", e.Data()) {
				t.Errorf("data: %v", err)
			}
		})
	}
}

// compareGolden writes want as the example of name with -update, and
// fails when the example file is not want.
func compareGolden(t *testing.T, name string, want []byte) {
	t.Helper()
	path := filepath.Join(docsDir, name+".example.json")
	if updateGolden() {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("%s is stale; run go test ./pkg/events -run TestGoldenExamples -update (or BUB_UPDATE_GOLDEN=1)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// checkTapeEntry checks a stored tape entry message: a CloudEvent of the
// golden session without a place in a run's sequence, whose data is the
// entry exactly as its JSONL line (tape.WriteJSONL) renders it.
func checkTapeEntry(t *testing.T, raw []byte) {
	t.Helper()
	e, err := events.Decode(map[string][]string{"Content-Type": {events.ContentTypeStructured}}, raw)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if e.Type() != events.TypeTapeEntry || e.Type() != tape.EntryEventType || events.SessionID(e) != sampleMeta.SessionID || events.Seq(e) != 0 {
		t.Fatalf("attributes: type %s session %q seq %d", e.Type(), events.SessionID(e), events.Seq(e))
	}
	entries, err := tape.ReadJSONL(bytes.NewReader(e.Data()))
	if err != nil || len(entries) != 1 {
		t.Fatalf("data %s holds %d entries (%v), want one", e.Data(), len(entries), err)
	}
	var line bytes.Buffer
	if err := tape.WriteJSONL(&line, entries); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(line.Bytes(), append(e.Data(), '\n')) {
		t.Errorf("data %s is not the JSONL line %s", e.Data(), line.Bytes())
	}
	if date, err := time.Parse(time.RFC3339Nano, entries[0].Date); err != nil || !e.Time().Equal(date) {
		t.Errorf("time %v, entry date %q", e.Time(), entries[0].Date)
	}
	if run, _ := entries[0].Meta["run_id"].(string); events.RunID(e) != run {
		t.Errorf("runid %q, entry run_id %q", events.RunID(e), run)
	}
}

// checkExample validates a golden example file's content.
func checkExample(t *testing.T, schemas *schemaSet, name, typ string, file []byte) {
	t.Helper()
	for _, err := range schemas.validate("cloudevent.schema.json", file) {
		t.Errorf("CloudEvent attributes: %v", err)
	}
	e, err := events.Decode(map[string][]string{"Content-Type": {events.ContentTypeStructured}}, file)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	// Envelopes, dropped turns and stale-tape reports belong to no run:
	// no runid, no seq.
	runless := typ == events.TypeEnvelopeInbound || typ == events.TypeEnvelopeOutbound || typ == events.TypeTurnDropped || typ == events.TypeTapeStale
	unsequenced := runless
	if e.Type() != typ || events.SessionID(e) != sampleMeta.SessionID || (events.RunID(e) == sampleMeta.RunID) == runless || (events.Seq(e) == 0) != unsequenced {
		t.Fatalf("decoded attributes: type %s session %q run %q seq %d", e.Type(), events.SessionID(e), events.RunID(e), events.Seq(e))
	}
	for _, err := range schemas.validate(name+".schema.json", e.Data()) {
		t.Errorf("payload: %v", err)
	}
	payload, err := events.DecodePayload(e)
	if err != nil {
		t.Fatalf("DecodePayload: %v", err)
	}
	again, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(canonical(t, again), canonical(t, e.Data())) {
		t.Errorf("payload does not round-trip:\n%s\n%s", again, e.Data())
	}
	// The zero payload must have the schema's shape: omitempty and
	// required agree, and no nil slice becomes a null the schema forbids.
	zero, err := events.New(typ, sampleAttrs(1), map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	zp, err := events.DecodePayload(zero)
	if err != nil {
		t.Fatal(err)
	}
	zb, _ := json.Marshal(zp)
	shape := *schemas
	shape.shapeOnly = true
	for _, err := range shape.validate(name+".schema.json", zb) {
		t.Errorf("zero payload %s: %v", zb, err)
	}
}

// TestCapturedContentMatchesSchemas validates the payloads that only
// content capture produces, which the golden examples leave out.
func TestCapturedContentMatchesSchemas(t *testing.T) {
	schemas := loadSchemas(t, docsDir)
	codec := events.Codec{CaptureContent: true}
	text := "hi"
	for _, ev := range []events.Event{
		&events.LLMCallStarted{Request: llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(text)}}}, Decision: llm.Finish(text)},
		&events.LLMCallFinished{Result: llm.Result{Text: text, ToolCalls: []llm.ToolCall{{ID: "c", Type: "function", Function: llm.FunctionCall{Name: "bash", Arguments: "{}"}}}}},
		&events.MessagesPending{Messages: []llm.Message{{Role: llm.RoleUser, Content: llm.Text(text)}}},
	} {
		e, err := codec.ToCloudEvent(ev, sampleAttrs(1))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(e.Data(), []byte(`"hi"`)) {
			t.Errorf("%s: captured payload lacks the content: %s", e.Type(), e.Data())
		}
		for _, err := range schemas.validate(events.SubjectName(e.Type())+".schema.json", e.Data()) {
			t.Errorf("%s: %v", e.Type(), err)
		}
	}
}

// TestDocsListEveryType checks that docs/events has a schema per type and
// that the README names every type and its subject.
func TestDocsListEveryType(t *testing.T) {
	readme := string(readFile(t, filepath.Join(docsDir, "README.md")))
	for _, typ := range events.Types() {
		name := events.SubjectName(typ)
		if _, err := os.Stat(filepath.Join(docsDir, name+".schema.json")); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		for _, want := range []string{"`" + typ + "`", "bub.events.<session-token>." + name, "(" + name + ".schema.json)", "(" + name + ".example.json)"} {
			if typ == events.TypeEnvelopeInbound || typ == events.TypeEnvelopeOutbound {
				if strings.HasPrefix(want, "bub.events.") {
					continue // envelopes travel on their own subjects
				}
			}
			if !strings.Contains(readme, want) {
				t.Errorf("README lacks %s", want)
			}
		}
	}
	for _, ext := range []string{events.ExtRunID, events.ExtSessionID, events.ExtSeq, events.ExtPartitionKey, events.ExtTraceparent, events.ExtTracestate} {
		if !strings.Contains(readme, "`"+ext+"`") {
			t.Errorf("README lacks extension %s", ext)
		}
	}
}

// attrOrder is the order of the leading attributes in a golden example;
// the other attributes follow sorted, and data comes last.
var attrOrder = []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype"}

// exampleJSON formats a structured-mode event for a golden file: the
// attributes in a stable, readable order, data last with its fields in
// Go declaration order, two-space indentation, no HTML escaping.
func exampleJSON(t *testing.T, body []byte) []byte {
	t.Helper()
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(body, &attrs); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for k := range attrs {
		if !slices.Contains(attrOrder, k) && k != "data" {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, k := range slices.Concat(attrOrder, rest, []string{"data"}) {
		v, ok := attrs[k]
		if !ok {
			continue
		}
		if i > 0 {
			buf.WriteString(",")
		}
		fmt.Fprintf(&buf, "\n  %q: ", k)
		if err := json.Indent(&buf, unescapeHTML(v), "  ", "  "); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString("\n}\n")
	return buf.Bytes()
}

// unescapeHTML undoes encoding/json's escaping of <, > and &, which is
// valid JSON but hard to read in a document.
func unescapeHTML(b []byte) []byte {
	return []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b)))
}

// canonical returns JSON with sorted keys and two-space indentation.
func canonical(t *testing.T, b []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// checkTapeIndex checks a stored tape index message: a CloudEvent of the
// golden session, outside any run, whose data is an index of that tape
// with entries (batch is 0: one server's appends are checked chains, whose
// index knows every position).
func checkTapeIndex(t *testing.T, raw []byte) {
	t.Helper()
	e, err := events.Decode(map[string][]string{"Content-Type": {events.ContentTypeStructured}}, raw)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if e.Type() != events.TypeTapeIndex || e.Type() != tape.IndexEventType || events.SessionID(e) != sampleMeta.SessionID || events.Seq(e) != 0 || events.RunID(e) != "" {
		t.Fatalf("attributes: type %s session %q seq %d run %q", e.Type(), events.SessionID(e), events.Seq(e), events.RunID(e))
	}
	var ix struct {
		tape.Index
		Batch int `json:"batch"`
	}
	if err := json.Unmarshal(e.Data(), &ix); err != nil || ix.Tape != sampleMeta.SessionID || ix.Batch != 0 || ix.Entries < 1 || ix.Seq == 0 {
		t.Fatalf("data %s: %v", e.Data(), err)
	}
}
