package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/tape"
)

// Bounds of the read API's query parameters.
const (
	// defaultTapeLimit and maxTapeLimit bound ?limit= of a tape page.
	defaultTapeLimit = 50
	maxTapeLimit     = 500
	// maxTapeQuery bounds ?q= in bytes.
	maxTapeQuery = 256
	// hooksTimeout bounds the wait for a worker's hook report.
	hooksTimeout = 3 * time.Second
)

// tapes opens the JetStream tape store on first use (the recorder
// provisions it; the ingress only reads), and again after a failure.
type tapes struct {
	mu    sync.Mutex
	store tape.Store
}

func (s *Server) tapeStore(ctx context.Context) (tape.Store, error) {
	s.tapes.mu.Lock()
	defer s.tapes.mu.Unlock()
	if s.tapes.store == nil {
		st, err := tape.NewJetStreamStore(ctx, s.gw.js, s.gw.names, tape.WithoutProvisioning())
		if err != nil {
			return nil, err
		}
		s.tapes.store = st
	}
	return s.tapes.store, nil
}

// sessionSummary is one session of GET /v1/sessions.
type sessionSummary struct {
	ID         string `json:"id"`
	Entries    int64  `json:"entries"`
	Anchors    int64  `json:"anchors"`
	LastAnchor string `json:"last_anchor,omitempty"`
}

// listSessions serves GET /v1/sessions: every session with a tape.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	store, err := s.tapeStore(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "tapes_unavailable", err.Error())
		return
	}
	names, err := store.List(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "tapes_unavailable", err.Error())
		return
	}
	out := make([]sessionSummary, 0, len(names))
	for _, n := range names {
		ix, err := store.Index(r.Context(), n)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "tapes_unavailable", err.Error())
			return
		}
		ss := sessionSummary{ID: n, Entries: ix.Entries, Anchors: ix.Anchors}
		if a, ok := ix.LastAnchor(); ok {
			ss.LastAnchor = a.Name
		}
		out = append(out, ss)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// TapePage selects a page of a tape: GET /v1/sessions/{session}/tape
// ?offset=&limit=&q=.
type TapePage struct {
	// Offset is the position of the page's first entry among the matching
	// entries (0 = the oldest); Tail (no offset given) means the last page.
	Offset int
	Tail   bool
	// Limit is the page size (1–500, default 50).
	Limit int
	// Query keeps entries whose JSON contains it, case-insensitively (the
	// tape query's Text; at most 256 bytes).
	Query string
}

// ParseTapePage decodes the query parameters of a tape page; the error
// names the bad parameter.
func ParseTapePage(v url.Values) (TapePage, error) {
	p := TapePage{Tail: true, Limit: defaultTapeLimit, Query: v.Get("q")}
	if len(p.Query) > maxTapeQuery {
		return TapePage{}, fmt.Errorf("q is longer than %d bytes", maxTapeQuery)
	}
	if o := v.Get("offset"); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < 0 {
			return TapePage{}, fmt.Errorf("offset %q is not a non-negative integer", o)
		}
		p.Offset, p.Tail = n, false
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxTapeLimit {
			return TapePage{}, fmt.Errorf("limit %q is not an integer from 1 to %d", l, maxTapeLimit)
		}
		p.Limit = n
	}
	return p, nil
}

// anchorRef is one anchor of a tape page: its entry id and its position
// in the whole tape (the offset of a page starting at it).
type anchorRef struct {
	Name     string `json:"name"`
	ID       int64  `json:"id"`
	Position int    `json:"position"`
}

// tapePage is the body of GET /v1/sessions/{session}/tape.
type tapePage struct {
	Session string       `json:"session"`
	Query   string       `json:"q,omitempty"`
	Total   int          `json:"total"`
	Offset  int          `json:"offset"`
	Limit   int          `json:"limit"`
	Entries []tape.Entry `json:"entries"`
	// Anchors are every anchor of the tape, oldest first.
	Anchors []anchorRef `json:"anchors"`
}

// readTape serves GET /v1/sessions/{session}/tape.
func (s *Server) readTape(w http.ResponseWriter, r *http.Request) {
	p, err := ParseTapePage(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_query", err.Error())
		return
	}
	session, ok := sessionOf(w, r)
	if !ok {
		return
	}
	store, err := s.tapeStore(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "tapes_unavailable", err.Error())
		return
	}
	all, err := store.Fetch(r.Context(), session, tape.All())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "tapes_unavailable", err.Error())
		return
	}
	if len(all) == 0 {
		writeError(w, http.StatusNotFound, "no_tape", fmt.Sprintf("session %q has no tape", session))
		return
	}
	page := tapePage{Session: session, Query: p.Query, Limit: p.Limit, Anchors: []anchorRef{}}
	for i, e := range all {
		if e.Kind == tape.KindAnchor {
			name, _ := e.Payload["name"].(string)
			page.Anchors = append(page.Anchors, anchorRef{Name: name, ID: e.ID, Position: i})
		}
	}
	matched, err := tape.All().Text(p.Query).Apply(all)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_query", err.Error())
		return
	}
	page.Total = len(matched)
	page.Offset = min(p.Offset, page.Total)
	if p.Tail {
		page.Offset = max(0, page.Total-p.Limit)
	}
	page.Entries = matched[page.Offset:min(page.Offset+p.Limit, page.Total)]
	writeJSON(w, http.StatusOK, page)
}

// readStatus serves GET /v1/status: what `bub status --json` prints.
func (s *Server) readStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, status.Collect(r.Context(), s.gw.nc, s.gw.js, s.gw.names))
}

// readHooks serves GET /v1/hooks: a running worker's hook report (what
// `bub hooks` prints), or 503 no_worker when no worker answers.
func (s *Server) readHooks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), hooksTimeout)
	defer cancel()
	rep, err := status.AskHooks(ctx, s.gw.nc, s.gw.names)
	switch {
	case errors.Is(err, status.ErrNoWorker):
		writeError(w, http.StatusServiceUnavailable, "no_worker", err.Error())
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "hooks_unavailable", err.Error())
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}

// sessionOf returns the {session} of r's path, or answers 400 when it is
// too long to be a session id (envelope.MaxNameBytes).
func sessionOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	session := r.PathValue("session")
	if err := envelope.CheckName("session", session); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_session", err.Error())
		return "", false
	}
	return session, true
}
