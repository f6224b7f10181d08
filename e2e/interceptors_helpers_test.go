package e2e

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/llm"
	"github.com/bubbus/bub/pkg/subjects"
)

// icPingWindow is how long icInstances waits for further PING replies.
const icPingWindow = 200 * time.Millisecond

// icInstances returns how many instances of an interceptor service answer
// a NATS micro PING.
func icInstances(t *testing.T, nc *nats.Conn, service string) int {
	t.Helper()
	subj, err := micro.ControlSubject(micro.PingVerb, service, "")
	if err != nil {
		t.Fatal(err)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := sub.NextMsg(icPingWindow)
		switch {
		case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout):
			return n
		case err != nil:
			t.Fatal(err)
		}
		n++
	}
}

// icWaitInstances waits until every service has the given number of
// running instances.
func icWaitInstances(t *testing.T, nc *nats.Conn, want map[string]int) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		got := map[string]int{}
		for service := range want {
			got[service] = icInstances(t, nc, service)
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("interceptor instances %v, want %v", got, want)
	})
}

// icDecisions records the hook.decision events of every session.
type icDecisions struct {
	mu   sync.Mutex
	list []icDecision
}

// icDecision is one hook.decision event.
type icDecision struct {
	Session string
	events.HookDecisionData
}

func icWatchDecisions(t *testing.T, nc *nats.Conn) *icDecisions {
	t.Helper()
	d := &icDecisions{}
	sub, err := nc.Subscribe(subjects.Default().EventsAll(), func(m *nats.Msg) {
		ev, err := events.FromMsg(m)
		if err != nil || ev.Type() != events.TypeHookDecision {
			return
		}
		var data events.HookDecisionData
		if err := events.DecodeData(ev, &data); err != nil {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.list = append(d.list, icDecision{Session: ev.Subject(), HookDecisionData: data})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return d
}

// of returns the decisions of a session as "plugin hook action" strings.
func (d *icDecisions) of(session string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, x := range d.list {
		if x.Session == session {
			out = append(out, x.Plugin+" "+x.Hook+" "+x.Action)
		}
	}
	return out
}

// find returns the first decision of a session by plugin and action.
func (d *icDecisions) find(session, plugin, action string) (icDecision, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.list {
		if x.Session == session && x.Plugin == plugin && x.Action == action {
			return x, true
		}
	}
	return icDecision{}, false
}

// icToolResult returns the text of the tool message answering callID in a
// model request, "" when there is none.
func icToolResult(req fakellm.Request, callID string) string {
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool && m.ToolCallID == callID {
			return m.Content.PlainText()
		}
	}
	return ""
}

// icTurn posts one message and returns its only reply's content.
func icTurn(t *testing.T, web, session, content string) string {
	t.Helper()
	status, r := post(t, web, map[string]any{"content": content, "session_id": session}, "30s")
	if status != 200 || len(r.Outbounds) != 1 {
		t.Fatalf("%s: reply %d %+v", session, status, r)
	}
	return strings.TrimSpace(r.Outbounds[0].Content)
}
