package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
			name, data := sseEvent(m, m.Sub == subs[0]) // the token stream's
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		}
		flusher.Flush()
	}
}

// sseEvent names and renders one NATS message for the SSE stream: a
// token delta (delta, from the token stream, never a CloudEvent) as the
// JSON it is, a lifecycle event as a structured CloudEvent, and anything
// else as an "invalid" event that says why. The data is one line, as SSE's
// framing needs: JSON that spans lines (a publisher's pretty-printed
// event data) is compacted.
func sseEvent(m *nats.Msg, delta bool) (name string, data []byte) {
	if delta {
		if !json.Valid(m.Data) {
			return sseError(m, errors.New("a token delta that is not JSON"))
		}
		return "delta", oneLine(m.Data)
	}
	ev, err := events.FromMsg(m)
	if err != nil {
		return sseError(m, err)
	}
	b, err := ev.MarshalJSON()
	if err == nil && !json.Valid(b) {
		// sdk-go writes the data of a binary-mode event as it is: not
		// JSON when the event's data is not, whatever its content type.
		err = errors.New("its data is not JSON: it has no structured form")
	}
	if err == nil && strings.ContainsAny(ev.Type(), "\r\n") {
		// The type names the SSE event, on a line of its own.
		err = errors.New("its type has a line break")
	}
	if err != nil {
		return sseError(m, err)
	}
	return ev.Type(), oneLine(b)
}

// oneLine returns valid JSON b without its line breaks: b itself when it
// has none (Bub's own messages), else compacted.
func oneLine(b []byte) []byte {
	if !bytes.ContainsAny(b, "\r\n") {
		return b
	}
	var c bytes.Buffer
	_ = json.Compact(&c, b) // b is valid JSON: Compact cannot fail
	return c.Bytes()
}

// sseError is the "invalid" event of message m: err and m's subject. It
// is not named "error": a browser's EventSource dispatches an event of
// that name to the same listeners (onerror) as a failed connection.
func sseError(m *nats.Msg, err error) (name string, data []byte) {
	b, _ := json.Marshal(map[string]string{"error": err.Error(), "subject": m.Subject})
	return "invalid", b
}
