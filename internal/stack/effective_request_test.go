package stack_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/tape"
)

const pirate = "You are a pirate. Answer in pirate speak."

// rewriter is a local before_llm_call interceptor that replaces the
// system prompt.
type rewriter struct{}

func (rewriter) Name() string { return "rewriter" }

func (rewriter) BeforeLLMCall(_ context.Context, in hooks.BeforeLLMCallInput) (*llm.Request, *llm.Decision, error) {
	req := in.Request.Clone()
	if len(req.Messages) == 0 || req.Messages[0].Role != llm.RoleSystem {
		return nil, nil, nil
	}
	req.Messages[0] = llm.Message{Role: llm.RoleSystem, Content: llm.Text(pirate)}
	return &req, nil, nil
}

// lastEvent returns the payload of the last event of a type in session.
func lastEvent[T any](t *testing.T, c *stacktest.Cluster, session, typ string) *T {
	t.Helper()
	st, err := c.Conn.JS.Stream(t.Context(), c.Conn.Names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	raw, err = st.GetLastMsgForSubject(t.Context(), c.Conn.Names.Event(session, events.SubjectName(typ)))
	if err != nil {
		t.Fatalf("no %s event: %v", typ, err)
	}
	ev, err := events.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := events.DecodeData(ev, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRewrittenSystemPromptIsRecorded: a local plugin rewrites the system
// prompt in before_llm_call. The provider receives the rewritten prompt,
// and that one — not the prompt from before the rewrite — is what
// chat.finished and the tape's system entry record; the hook.decision
// event's detail says the system prompt changed, and nothing else.
func TestRewrittenSystemPromptIsRecorded(t *testing.T) {
	c := stacktest.Start(t, stacktest.Options{
		Script:  fakellm.Script{Steps: []fakellm.Step{{Text: "Arr."}}},
		Plugins: []hooks.Plugin{rewriter{}},
	})
	const session = "effective:1"
	outs := c.Turn(t, &envelope.Envelope{ID: "eff-1", Content: "hello", Channel: "test", SessionID: session})
	if len(outs) != 1 || outs[0].Content != "Arr." {
		t.Fatalf("replies %+v", outs)
	}
	reqs := c.LLM.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) == 0 || reqs[0].Messages[0].Role != llm.RoleSystem || reqs[0].Messages[0].Content.PlainText() != pirate {
		t.Fatalf("the provider got %+v, want the rewritten system prompt first", reqs)
	}

	system := tapeContents(t, c, session, tape.KindSystem)
	if len(system) != 1 || system[0] != pirate {
		t.Errorf("tape system entries %q, want [%q]", system, pirate)
	}
	if chat := lastEvent[events.ChatFinishedData](t, c, session, events.TypeChatFinished); chat.SystemPrompt != pirate {
		t.Errorf("chat.finished system_prompt %q, want %q", chat.SystemPrompt, pirate)
	}
	dec := lastEvent[events.HookDecisionData](t, c, session, events.TypeHookDecision)
	if dec.Plugin != "rewriter" || dec.Action != "modify" || dec.Hook != "before_llm_call" {
		t.Fatalf("decision %+v", dec)
	}
	sp, ok := dec.Detail["system_prompt"].(map[string]any)
	if !ok || len(dec.Detail) != 1 || sp["after_len"] != float64(len(pirate)) || sp["before_len"] == sp["after_len"] {
		t.Errorf("decision detail %v, want only the system prompt's change with after_len %d", dec.Detail, len(pirate))
	}
}

// tapeContents returns the content of every entry of kind on session's
// tape, oldest first.
func tapeContents(t *testing.T, c *stacktest.Cluster, session, kind string) []string {
	t.Helper()
	var out []string
	for _, e := range c.Tape(t, session) {
		if e.Kind == kind {
			content, _ := e.Payload["content"].(string)
			out = append(out, content)
		}
	}
	return out
}
