package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/internal/stacktest"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/hooks"
	"github.com/bubbus/bub/pkg/tools"
)

// updateGolden reports whether the golden examples are to be rewritten:
// -update or BUB_UPDATE_GOLDEN=1.
func updateGolden() bool { return *update || os.Getenv("BUB_UPDATE_GOLDEN") == "1" }

// realTypes are the types whose golden example is a real event captured
// from the cluster turns of captureReal; the examples of the other types
// (events a healthy test turn does not produce: failures, dead letters,
// stale tapes, channel framework events) are built from Go values by
// samples.
var realTypes = []string{
	events.TypeEnvelopeInbound, events.TypeEnvelopeOutbound,
	events.TypeRunStarted, events.TypeRunFinished, events.TypeStepStarted, events.TypeStepFinished,
	events.TypeMessagesPending, events.TypeLLMCallStarted, events.TypeLLMCallFinished,
	events.TypeToolCallStarted, events.TypeToolCallFinish, events.TypeChatFinished,
	events.TypeCommandFinished, events.TypeHookDecision, events.TypeTapeEvent,
	events.TypeApprovalRequested, events.TypeApprovalAnswered,
}

// The envelope ids of the captured turns (client-chosen, so fixed).
const (
	goldenInboundID = "0199a1b2-0000-7000-8000-0000000000e1"
	goldenCommandID = "0199a1b2-0000-7000-8000-0000000000e3"
)

// goldenPolicy is the local plugin of the captured turns: it denies the
// model's bash calls, so the turn has a hook.decision, and asks a person
// about its tape_info calls, which the test approves (approval.requested,
// approval.answered).
type goldenPolicy struct{}

func (goldenPolicy) Name() string { return "policy" }

func (goldenPolicy) BeforeToolCall(_ context.Context, in hooks.BeforeToolCallInput) (*tools.Decision, error) {
	switch {
	case in.Call.CallID == "":
	case in.Call.Tool == "bash":
		return tools.Deny("Destructive commands need approval."), nil
	case in.Call.Tool == "tape_info":
		return tools.Ask("Reading the tape needs your approval.", time.Hour, tools.ActionDeny), nil
	}
	return nil, nil
}

// approveAll approves every approval of c's turns as it is requested,
// as `bub approve` does, until the test ends.
func approveAll(t *testing.T, c *stacktest.Cluster) {
	t.Helper()
	store, err := approvals.Open(t.Context(), c.Conn.JS, c.Conn.Names)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Conn.NC.Subscribe(c.Conn.Names.EventsOfType(events.SubjectName(events.TypeApprovalRequested)), func(m *nats.Msg) {
		ev, err := events.Decode(m.Header, m.Data)
		var d events.ApprovalRequestedData
		if err == nil {
			err = events.DecodeData(ev, &d)
		}
		if err == nil {
			_, err = store.Answer(context.Background(), d.ID, true, "Go ahead.", "cli")
		}
		if err != nil {
			t.Errorf("approving: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := c.Conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
}

// startGolden starts the in-process cluster of the golden turns: its fake
// model calls bash (which goldenPolicy denies), then tape_info (which it
// asks about, and approveAll approves), then answers.
func startGolden(t *testing.T, instance string) *stacktest.Cluster {
	t.Helper()
	c := stacktest.Start(t, stacktest.Options{
		Instance: instance,
		Script: fakellm.Script{Steps: []fakellm.Step{
			{ToolCalls: []fakellm.ToolCall{{Name: "bash", Arguments: json.RawMessage(`{"cmd": "rm -rf /"}`)}}},
			{ToolCalls: []fakellm.ToolCall{{Name: "tape_info"}}},
			{Text: "All 42 tests pass."},
		}},
		Plugins: []hooks.Plugin{goldenPolicy{}},
	})
	approveAll(t, c)
	return c
}

// goldenTurns runs the golden turns on c, a model turn and a comma
// command, and waits for their replies.
func goldenTurns(t *testing.T, c *stacktest.Cluster) {
	t.Helper()
	for _, env := range []*envelope.Envelope{
		{ID: goldenInboundID, Content: "run the tests", Channel: "telegram", ChatID: "42", SessionID: sampleMeta.SessionID},
		{ID: goldenCommandID, Content: ",tape.info", Channel: "telegram", ChatID: "42", SessionID: sampleMeta.SessionID},
	} {
		c.Turn(t, env)
	}
}

// captureReal runs real turns on an in-process cluster (worker, recorder,
// fake model; see internal/stacktest) — a model turn with a denied tool
// call and a tool call, then a comma command — and returns the first
// event of each type as published: inbound envelopes from a subscription
// on bub.inbound.>, the rest from the events, outbound and tapes streams.
func captureReal(t *testing.T) map[string][]byte {
	t.Helper()
	c := startGolden(t, "golden")
	out := map[string][]byte{}
	// keep records the event and checks its id against the wire: the
	// Nats-Msg-Id (when it came from a stream) and the documented form.
	keep := func(data []byte, msgID string) {
		ev, err := events.Decode(map[string][]string{"Content-Type": {events.ContentTypeStructured}}, data)
		if err != nil {
			t.Errorf("captured event: %v", err)
			return
		}
		if msgID != "" && msgID != ev.ID() {
			t.Errorf("%s: id %q, Nats-Msg-Id %q", ev.Type(), ev.ID(), msgID)
		}
		switch typ := ev.Type(); {
		case typ == events.TypeEnvelopeInbound:
			if ev.ID() != goldenInboundID && ev.ID() != goldenCommandID {
				t.Errorf("inbound id %q is not the envelope id", ev.ID())
			}
		case typ == events.TypeEnvelopeOutbound:
			if ev.ID() != goldenInboundID+"/0" && ev.ID() != goldenCommandID+"/0" {
				t.Errorf("outbound id %q is not <inbound id>/0", ev.ID())
			}
		case typ == events.TypeTapeEntry || typ == events.TypeTapeIndex:
			if !tapeEntryID.MatchString(ev.ID()) || strings.Contains(ev.ID(), ":index:") != (typ == events.TypeTapeIndex) {
				t.Errorf("%s id %q is not <tape token>:<entry id or index>:<commit key>:<revision>", typ, ev.ID())
			}
		case !uuidV7.MatchString(ev.ID()):
			t.Errorf("%s id %q is not a UUIDv7", typ, ev.ID())
		}
		if _, ok := out[ev.Type()]; !ok {
			out[ev.Type()] = data
		}
	}
	inbound, err := c.Conn.NC.SubscribeSync(c.Conn.Names.InboundAll())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	goldenTurns(t, c)
	m, err := inbound.NextMsg(stacktest.Wait)
	if err != nil {
		t.Fatal(err)
	}
	keep(m.Data, m.Header.Get(nats.MsgIdHdr))
	if err := inbound.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	c.Tape(t, sampleMeta.SessionID) // every event published and recorded
	for _, stream := range []string{c.Conn.Names.EventsStream(), c.Conn.Names.OutboundStream(), c.Conn.Names.TapesStream()} {
		st, err := c.Conn.JS.Stream(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			raw, err := st.GetMsg(t.Context(), seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) && stream == c.Conn.Names.TapesStream() {
				continue // an index a later one rolled up
			}
			if err != nil {
				t.Fatal(err)
			}
			if raw.Header.Get(nats.MsgIdHdr) == "" {
				t.Errorf("%s %d has no %s", stream, seq, nats.MsgIdHdr)
			}
			keep(raw.Data, raw.Header.Get(nats.MsgIdHdr))
		}
	}
	return out
}

// Normalisation of a captured event's volatile values (documented in
// docs/events/README.md, "Golden examples").
var (
	uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	// tapeEntryID is the id of a tape entry of the golden session:
	// its commit key and index revision vary.
	tapeEntryID = regexp.MustCompile(`^(telegram_3a42:(?:\d+|index)):([0-9a-f]{32}|~[A-Z2-7]+):(\d+)$`)
	// commitID is a run id, the recorder's commit id: <UUIDv7>@<envelope id>.
	commitID = regexp.MustCompile(`"id":"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}@`)
	// watermark is a watermark of a tape index: an events-stream sequence.
	watermark = regexp.MustCompile(`"(events)":\d+`)
	// dateTime is an RFC 3339 time; its zone ("Z" or "+00:00") is kept.
	dateTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	// millis is a duration field of the compact JSON body.
	millis = regexp.MustCompile(`"(\w+_ms)":\d+`)
)

// normalise replaces the volatile values of a captured event body with
// fixed ones: a lifecycle event's id (a fresh UUIDv7) becomes the n-th
// placeholder id, the run id sampleMeta's, every time 2026-01-02T03:04:05,
// every *_ms duration 0, and the instance names w1 (worker) and i1
// (ingress). Envelope ids, which the test chose, stay; a tape entry's id
// keeps its tape and entry id, and its commit key and index revision
// become fixed ones; so does a tape index's id, its commits' run ids
// become placeholder ids and its events watermark 12.
func normalise(t *testing.T, body []byte, n int) []byte {
	t.Helper()
	var attrs struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		RunID string `json:"runid"`
	}
	if err := json.Unmarshal(body, &attrs); err != nil {
		t.Fatal(err)
	}
	s := string(body)
	switch {
	case attrs.Type == events.TypeTapeEntry:
		s = strings.ReplaceAll(s, `"id":"`+attrs.ID+`"`, `"id":"`+tapeEntryID.ReplaceAllString(attrs.ID, "${1}:0123456789abcdef0123456789abcdef:1")+`"`)
	case attrs.Type == events.TypeTapeIndex:
		s = strings.ReplaceAll(s, `"id":"`+attrs.ID+`"`, `"id":"`+tapeEntryID.ReplaceAllString(attrs.ID, "${1}:0123456789abcdef0123456789abcdef:0")+`"`)
		k := 0
		s = commitID.ReplaceAllStringFunc(s, func(string) string {
			k++
			return fmt.Sprintf(`"id":"0199a1b2-c3d4-7e5f-8a9b-%012d@`, k)
		})
		s = watermark.ReplaceAllString(s, `"$1":12`)
	case attrs.RunID != "":
		s = strings.ReplaceAll(s, `"id":"`+attrs.ID+`"`, fmt.Sprintf(`"id":"0199a1b2-c3d4-7e5f-8a9b-%012d"`, n))
	}
	if attrs.RunID != "" {
		s = strings.ReplaceAll(s, attrs.RunID, sampleMeta.RunID)
	}
	s = dateTime.ReplaceAllString(s, "2026-01-02T03:04:05$2")
	s = millis.ReplaceAllString(s, `"$1":0`)
	s = strings.NewReplacer(`"/bub/worker/golden-w0"`, `"/bub/worker/w1"`, `"/bub/ingress/golden"`, `"/bub/ingress/i1"`).Replace(s)
	return []byte(s)
}
