package ingress

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/pkg/events"
)

// sseBuffer bounds the messages an SSE stream may fall behind by; a client
// slower than that loses the oldest (token deltas are never needed for
// correctness, lifecycle events stay in the events stream).
const sseBuffer = 4096

// streamSession serves GET /v1/sessions/{session}/events as server-sent
// events: "delta" events carry token deltas ({run_id, seq, kind, text,
// turn, step, offset}) and every lifecycle CloudEvent of the session is
// sent with its type as the SSE event name and the structured CloudEvent
// as data.
func (s *Server) streamSession(w http.ResponseWriter, r *http.Request) {
	session, ok := sessionOf(w, r)
	if !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "no_streaming", "the response writer cannot stream")
		return
	}
	msgs := make(chan *nats.Msg, sseBuffer)
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}()
	for _, subject := range []string{s.gw.names.TokenStreamOf(session), s.gw.names.EventsOf(session)} {
		sub, err := s.gw.nc.ChanSubscribe(subject, msgs)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "subscribe_failed", err.Error())
			return
		}
		subs = append(subs, sub)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": streaming session %q\n\n", session)
	flusher.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.draining:
			return // the server shuts down: the client reconnects elsewhere
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case m := <-msgs:
			name, data := sseEvent(m)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		}
		flusher.Flush()
	}
}

// sseEvent names and renders one NATS message for the SSE stream.
func sseEvent(m *nats.Msg) (name string, data []byte) {
	ev, err := events.FromMsg(m)
	if err != nil {
		if json.Valid(m.Data) {
			return "delta", m.Data
		}
		b, _ := json.Marshal(map[string]string{"error": err.Error(), "subject": m.Subject})
		return "error", b
	}
	b, _ := ev.MarshalJSON()
	return ev.Type(), b
}
