package approvals

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/subjects"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	_, js := natstest.Start(t).JetStream(t)
	names := subjects.Default()
	if err := natsx.EnsureTopology(t.Context(), js, names, natsx.Topology{MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pending(id string, timeout time.Duration) agent.Approval {
	now := time.Now().UTC()
	return agent.Approval{ID: id, SessionID: "s", Tool: "bash", Default: "deny", Created: now, Deadline: now.Add(timeout), Status: agent.ApprovalPending}
}

// One answer wins: the waiter sees it, a second answer is refused with
// the first, and a request for the same id finds the record.
func TestAnswerOnceWakesTheWaiter(t *testing.T) {
	s := openStore(t)
	id := "0123456789abcdef0123456789abcdef"
	if _, created, err := s.Request(t.Context(), pending(id, time.Hour)); err != nil || !created {
		t.Fatalf("Request: created %v, %v", created, err)
	}
	waited := make(chan agent.Approval, 1)
	go func() {
		a, err := s.Wait(t.Context(), id)
		if err != nil {
			t.Error(err)
		}
		waited <- a
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter start watching: the answer then reaches it as an update
	if _, err := s.Answer(t.Context(), id, false, "no", "http"); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-waited:
		if a.Status != agent.ApprovalDenied || a.AnswerReason != "no" || a.By != "http" {
			t.Fatalf("waiter saw %+v", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not see the answer")
	}
	_, err := s.Answer(t.Context(), id, true, "", "cli")
	if ae, ok := errors.AsType[*AnsweredError](err); !ok || !errors.Is(err, ErrAnswered) || ae.Approval.Status != agent.ApprovalDenied {
		t.Fatalf("second answer: %v", err)
	}
	if a, created, err := s.Request(t.Context(), pending(id, time.Hour)); err != nil || created || a.Status != agent.ApprovalDenied {
		t.Fatalf("a later delivery's request: %+v, created %v, %v", a, created, err)
	}
	if _, err := s.Answer(t.Context(), "ffffffffffffffffffffffffffffffff", true, "", "cli"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// At the deadline the wait records a timeout, and a late answer is
// refused as timed out.
func TestDeadlineRecordsATimeout(t *testing.T) {
	s := openStore(t)
	id := "00000000000000000000000000000001"
	if _, _, err := s.Request(t.Context(), pending(id, 300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	a, err := s.Wait(t.Context(), id)
	if err != nil || a.Status != agent.ApprovalTimedOut || a.By != "timeout" {
		t.Fatalf("Wait: %+v, %v", a, err)
	}
	if _, err := s.Answer(t.Context(), id, true, "", "cli"); !errors.Is(err, ErrAnswered) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("late answer: %v", err)
	}
	// A late answer to a record nobody timed out records the timeout.
	id2 := "00000000000000000000000000000002"
	if _, _, err := s.Request(t.Context(), pending(id2, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if _, err := s.Answer(t.Context(), id2, true, "", "cli"); !errors.Is(err, ErrAnswered) {
		t.Fatalf("late answer: %v", err)
	}
	if a, _, err := s.Get(t.Context(), id2); err != nil || a.Status != agent.ApprovalTimedOut {
		t.Fatalf("after a late answer: %+v, %v", a, err)
	}
}
