package ingress

import (
	"context"
	"errors"
	"net/http"
)

// answerRetry answers a POST whose envelope id the inbound stream already
// had (within its duplicate window): once the turn finished, 200 with its
// original replies, the body of a first successful ?wait POST; before,
// with wait it waits until ctx ends, what the publish left of the POST's
// ?wait, like a first ?wait POST (202 pending when the wait ends first),
// and without it is 202 as before.
func (s *Server) answerRetry(ctx context.Context, w http.ResponseWriter, rc Receipt, wait bool) {
	outs, err := s.gw.Answer(ctx, rc.ID, wait)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, reply{Receipt: rc, Outbounds: outs})
	case errors.Is(err, ErrUnfinished):
		writeJSON(w, http.StatusAccepted, reply{Receipt: rc, Pending: wait})
	case errors.Is(err, ErrReplyGone):
		writeError(w, http.StatusGone, "reply_gone", err.Error())
	default:
		s.log.Error("ingress.answer_failed", "id", rc.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "answer_unavailable", err.Error())
	}
}
