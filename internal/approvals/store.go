package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/subjects"
)

// Errors of [Store.Answer].
var (
	// ErrNotFound: no approval has the id.
	ErrNotFound = errors.New("no such approval")
	// ErrAnswered: the approval already ended (answered or timed out);
	// the *AnsweredError says how.
	ErrAnswered = errors.New("approval already answered")
)

// AnsweredError is the refusal of a second answer: Approval is the
// record as it ended.
type AnsweredError struct{ Approval agent.Approval }

func (e *AnsweredError) Error() string {
	a := e.Approval
	if a.Status == agent.ApprovalTimedOut {
		return fmt.Sprintf("approval %s timed out at %s (default %s applied)", a.ID, a.Deadline.Format(time.RFC3339), a.Default)
	}
	return fmt.Sprintf("approval %s was already %s by %s at %s", a.ID, a.Status, a.By, a.Answered.Format(time.RFC3339))
}

func (e *AnsweredError) Unwrap() error { return ErrAnswered }

// Store reads and writes approval records. It implements agent.Approver.
type Store struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// Open binds the approvals bucket (provisioned with the topology).
func Open(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*Store, error) {
	kv, err := js.KeyValue(ctx, names.ApprovalsBucket())
	if err != nil {
		return nil, fmt.Errorf("binding approvals bucket: %w", err)
	}
	return &Store{kv: kv, now: time.Now}, nil
}

// Request creates the record of a, or returns the one an earlier delivery
// of the same turn created under a.ID (created false).
func (s *Store) Request(ctx context.Context, a agent.Approval) (agent.Approval, bool, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return agent.Approval{}, false, err
	}
	if _, err := s.kv.Create(ctx, a.ID, b); err == nil {
		return a, true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return agent.Approval{}, false, fmt.Errorf("recording approval %s: %w", a.ID, err)
	}
	got, _, err := s.Get(ctx, a.ID)
	return got, false, err
}

// Get returns approval id's record and its revision.
func (s *Store) Get(ctx context.Context, id string) (agent.Approval, uint64, error) {
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return agent.Approval{}, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return agent.Approval{}, 0, err
	}
	var a agent.Approval
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return agent.Approval{}, 0, fmt.Errorf("approval %s: %w", id, err)
	}
	return a, e.Revision(), nil
}

// Answer records a person's answer to approval id: approve or deny, with
// an optional reason; by names the channel it came through. It fails
// with ErrNotFound, or with an *AnsweredError when the approval already
// ended — answered before, or past its deadline (which it then records
// as the timeout it is).
func (s *Store) Answer(ctx context.Context, id string, approve bool, reason, by string) (agent.Approval, error) {
	return s.update(ctx, id, func(a *agent.Approval) error {
		if s.now().Before(a.Deadline) {
			a.Status, a.AnswerReason, a.By, a.Answered = agent.ApprovalDenied, reason, by, s.now().UTC()
			if approve {
				a.Status = agent.ApprovalApproved
			}
			return nil
		}
		timeout(a)
		return &AnsweredError{Approval: *a}
	})
}

// timeout ends a as timed out.
func timeout(a *agent.Approval) {
	a.Status, a.By, a.Answered = agent.ApprovalTimedOut, "timeout", a.Deadline
}

// update applies change to a pending record with a compare-and-set,
// retrying when another writer came first. change's error is returned
// after the record it changed was stored.
func (s *Store) update(ctx context.Context, id string, change func(*agent.Approval) error) (agent.Approval, error) {
	for {
		a, rev, err := s.Get(ctx, id)
		if err != nil {
			return agent.Approval{}, err
		}
		if a.Status != agent.ApprovalPending {
			return a, &AnsweredError{Approval: a}
		}
		cerr := change(&a)
		b, err := json.Marshal(a)
		if err != nil {
			return agent.Approval{}, err
		}
		if _, err := s.kv.Update(ctx, id, b, rev); errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Another answer or the timeout came first (a replicated
			// bucket says so with a revision mismatch): look again.
			continue
		} else if err != nil {
			return agent.Approval{}, fmt.Errorf("recording the answer to approval %s: %w", id, err)
		}
		return a, cerr
	}
}

// Wait blocks until approval id ends: answered, or timed out at its
// deadline, which Wait then records. It watches the key, so an answer
// written by any process ends the wait at once.
func (s *Store) Wait(ctx context.Context, id string) (agent.Approval, error) {
	w, err := s.kv.Watch(ctx, id, jetstream.UpdatesOnly())
	if err != nil {
		return agent.Approval{}, fmt.Errorf("watching approval %s: %w", id, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		a, _, err := s.Get(ctx, id) // after the watch started: no update is missed
		if err != nil || a.Status != agent.ApprovalPending {
			return a, err
		}
		timer := time.NewTimer(a.Deadline.Sub(s.now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return agent.Approval{}, ctx.Err()
		case _, ok := <-w.Updates():
			timer.Stop()
			if !ok {
				return agent.Approval{}, fmt.Errorf("watching approval %s: the watch ended", id)
			}
		case <-timer.C:
			a, err := s.update(ctx, id, func(a *agent.Approval) error {
				timeout(a)
				return nil
			})
			if errors.Is(err, ErrAnswered) {
				err = nil // an answer landed first
			}
			return a, err
		}
	}
}
