package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/dlq"
	"github.com/bubbus/bub/pkg/agent"
	"github.com/bubbus/bub/pkg/subjects"
)

// The answers to approvals (docs/hooks.md, "Approvals"): HTTP POST
// /v1/approvals/{id} and NATS requests on bub.approval.answer. Both
// write the answer to the approval's record (approvals.Store.Answer);
// the worker waiting for it, or the next delivery of its turn, reads it.

// WithApprovals makes s answer approvals through store
// (POST /v1/approvals/{id}); without it that endpoint answers 503.
func (s *Server) WithApprovals(store *approvals.Store) *Server {
	s.approvals = store
	return s
}

// answerReply is the body of a successful answer: the approval's record.
type answerReply struct {
	Approval agent.Approval `json:"approval"`
}

// answerError maps an answer's failure to its HTTP status and code.
func answerError(err error) (int, string) {
	switch {
	case errors.Is(err, approvals.ErrBadAnswer):
		return http.StatusBadRequest, "invalid_answer"
	case errors.Is(err, approvals.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, approvals.ErrAnswered):
		return http.StatusConflict, "already_answered"
	}
	return http.StatusServiceUnavailable, "approvals_unavailable"
}

func (s *Server) postApproval(w http.ResponseWriter, r *http.Request) {
	if s.approvals == nil {
		writeError(w, http.StatusServiceUnavailable, "approvals_unavailable", "this ingress does not answer approvals")
		return
	}
	id := r.PathValue("id")
	if !approvals.ValidID(id) {
		writeError(w, http.StatusNotFound, "not_found", "no such approval: "+id)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	a, err := approvals.DecodeAnswer(body, false)
	if err == nil {
		var rec agent.Approval
		if rec, err = s.approvals.Answer(r.Context(), id, a.Approve(), a.Reason, "http"); err == nil {
			writeJSON(w, http.StatusOK, answerReply{Approval: rec})
			return
		}
	}
	status, code := answerError(err)
	writeError(w, status, code, err.Error())
}

// answerTimeout bounds recording one NATS answer.
const answerTimeout = 10 * time.Second

// ServeApprovalAnswers answers NATS requests on names.ApprovalAnswer():
// the body is {"id", "decision", "reason"}; the reply is {"approval"} or
// {"error", "code"} with the codes of the HTTP endpoint. An invalid
// answer is also dead-lettered with its reason. The returned function
// stops serving.
func ServeApprovalAnswers(nc *nats.Conn, names subjects.Names, store *approvals.Store, dead *dlq.Writer, log *slog.Logger) (stop func() error, err error) {
	sub, err := nc.QueueSubscribe(names.ApprovalAnswer(), names.Service("ingress"), func(m *nats.Msg) {
		ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
		defer cancel()
		a, err := approvals.DecodeAnswer(m.Data, true)
		var reply any
		if err == nil {
			var rec agent.Approval
			if rec, err = store.Answer(ctx, a.ID, a.Approve(), a.Reason, "nats"); err == nil {
				reply = answerReply{Approval: rec}
			}
		}
		if err != nil {
			_, code := answerError(err)
			reply = errorBody{Error: err.Error(), Code: code}
			if errors.Is(err, approvals.ErrBadAnswer) {
				if derr := dead.Copy(ctx, m.Subject, m.Header, m.Data, dlq.ReasonInvalid, err); derr != nil {
					log.Warn("ingress.approval_dlq_failed", "err", derr)
				}
			}
		}
		if m.Reply == "" {
			return
		}
		b, _ := json.Marshal(reply)
		if rerr := m.Respond(b); rerr != nil {
			log.Warn("ingress.approval_reply_failed", "err", rerr)
		}
	})
	if err != nil {
		return nil, err
	}
	return sub.Unsubscribe, nil
}
