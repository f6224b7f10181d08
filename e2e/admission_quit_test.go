package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/fakellm"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/subjects"
)

// Bub's quit(session) (behaviour check 63): ,quit stops
// the session's other running turns, on whichever worker they run, and
// none of them replies after "Session tasks stopped.".
func TestAdmissionQuitStopsTheSessionsOtherTurns(t *testing.T) {
	s := startAdmissionStack(t, "process")
	// Two more slow answers, slow enough that only quit can end them.
	for range 2 {
		s.fake.Enqueue(fakellm.Step{Match: "glacial", Text: "too late.", Delay: fakellm.Duration(10 * time.Minute)})
	}
	session := "adm:quit"
	slow := []string{s.send(t, session, "glacial one"), s.send(t, session, "glacial two")}
	s.running(t, session, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.fake.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("the slow turns' model calls never came: %v", err)
	}
	quit := s.send(t, session, ",quit")
	out := s.replies(t, session, quit)
	if got := replyTo(out, quit).env.Content; got != "Session tasks stopped." {
		t.Fatalf("quit answered %q", got)
	}
	// The stopped turns ended (no run key left) as cancelled runs.
	s.running(t, session, 0)
	eventually(t, 30*time.Second, func() (bool, string) {
		n := s.runsFinished(t, session, events.RunCancelled)
		return n == 2, fmt.Sprintf("%d cancelled runs of %s, want 2", n, session)
	})
	for _, id := range slow {
		if o := replyTo(s.replies(t, session, quit), id); o.env.ID != "" {
			t.Errorf("stopped turn %s replied %q", id, o.env.Content)
		}
		t.Logf("slow turn %s ran on %s", id, s.workerOf(t, session, id))
	}
}

// runsFinished counts the run.finished events of session with status.
func (s *admissionStack) runsFinished(t *testing.T, session, status string) int {
	t.Helper()
	names := subjects.Default()
	st, err := s.js.Stream(context.Background(), names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for next := uint64(1); ; {
		raw, err := st.GetMsg(context.Background(), next, jetstream.WithGetMsgSubject(names.Event(session, events.SubjectName(events.TypeRunFinished))))
		if err != nil {
			return n
		}
		next = raw.Sequence + 1
		ev, err := events.Decode(raw.Header, raw.Data)
		if err != nil {
			continue
		}
		var d events.RunFinishedData
		if events.DecodeData(ev, &d) == nil && d.Status == status {
			n++
		}
	}
}
