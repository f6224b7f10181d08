package ingress

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// answerRetry answers a POST whose envelope id the inbound stream already
// had (within its duplicate window): once the turn finished, 200 with its
// original replies, the body of a first successful ?wait POST; before,
// it waits up to wait like a first ?wait POST (202 pending when the wait
// ends first), and without ?wait it is 202 as before.
func (s *Server) answerRetry(w http.ResponseWriter, r *http.Request, rc Receipt, wait time.Duration) {
	ctx := r.Context()
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	outs, err := s.gw.Answer(ctx, rc.ID, wait > 0)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, reply{Receipt: rc, Outbounds: outs})
	case errors.Is(err, ErrUnfinished):
		writeJSON(w, http.StatusAccepted, reply{Receipt: rc, Pending: wait > 0})
	case errors.Is(err, ErrReplyGone):
		writeError(w, http.StatusGone, "reply_gone", err.Error())
	default:
		s.log.Error("ingress.answer_failed", "id", rc.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "answer_unavailable", err.Error())
	}
}
