package ingress

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/bubbus/bub/internal/approvals"
	"github.com/bubbus/bub/internal/telemetry"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/events"
)

// Config configures the HTTP API. The zero value means the documented
// defaults.
type Config struct {
	// Addr is the listen address (127.0.0.1:8080).
	Addr string
	// MaxBodyBytes bounds a request body (1 MiB).
	MaxBodyBytes int64
	// Token, when set, is required as "Authorization: Bearer <token>".
	Token string
	// DefaultChannel names the channel of envelopes that give none ("http").
	DefaultChannel string
	// MaxWait caps ?wait= (5m).
	MaxWait time.Duration
	// ShutdownGrace bounds the drain of in-flight requests (10s).
	ShutdownGrace time.Duration
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.DefaultChannel == "" {
		c.DefaultChannel = "http"
	}
	if c.MaxWait == 0 {
		c.MaxWait = 5 * time.Minute
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	return c
}

// Validate reports impossible settings.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("max body bytes must be positive"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("max wait must be positive"))
	}
	return errors.Join(errs...)
}

// LogValue implements slog.LogValuer without the token.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Bool("token", c.Token != ""),
		slog.String("default_channel", c.DefaultChannel),
		slog.Duration("max_wait", c.MaxWait),
	)
}

// Ready reports whether the server can accept messages (NATS connected,
// streams present); nil means ready.
type Ready func(ctx context.Context) error

// Server is the ingress HTTP API.
type Server struct {
	cfg   Config
	gw    *Gateway
	ready Ready
	log   *slog.Logger
	tapes tapes
	// approvals answers POST /v1/approvals/{id} (nil: 503).
	approvals *approvals.Store
	// draining is closed when Run shuts down: the event streams end then,
	// as http.Server.Shutdown does not cancel the requests it waits for.
	draining  chan struct{}
	drainOnce sync.Once
}

// NewServer returns the HTTP API over gw.
func NewServer(cfg Config, gw *Gateway, ready Ready, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg.withDefaults(), gw: gw, ready: ready, log: log, draining: make(chan struct{})}, nil
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/messages", telemetry.HTTPHandler("POST /v1/messages", s.auth(s.postMessage)))
	mux.HandleFunc("GET /v1/sessions/{session}/events", s.auth(s.streamSession))
	mux.HandleFunc("GET /v1/sessions", s.auth(s.listSessions))
	mux.HandleFunc("POST /v1/approvals/{id}", s.auth(s.postApproval))
	mux.HandleFunc("GET /v1/sessions/{session}/tape", s.auth(s.readTape))
	mux.HandleFunc("GET /v1/status", s.auth(s.readStatus))
	mux.HandleFunc("GET /v1/hooks", s.auth(s.readHooks))
	mux.Handle("GET /ui/", consoleHandler())
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.ready(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, "not_ready", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	return mux
}

// Run serves on cfg.Addr until ctx ends, then shuts down gracefully. When
// ln is non-nil it is used instead of listening on cfg.Addr.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("ingress listen %s: %w", s.cfg.Addr, err)
		}
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("ingress.listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("ingress serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	s.drainOnce.Do(func() { close(s.draining) })
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("ingress shutdown: %w", err)
	}
	return nil
}

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	if s.cfg.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.Token)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bub"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
			return
		}
		next(w, r)
	}
}

// reply is the body of a successful POST /v1/messages.
type reply struct {
	Receipt
	Outbounds []envelope.Envelope `json:"outbounds,omitempty"`
	Pending   bool                `json:"pending,omitempty"`
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	wait, err := s.parseWait(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_wait", err.Error())
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	env, code, err := DecodeRequest(r.Header, body)
	if err != nil {
		status := http.StatusBadRequest
		if code == codeUnsupportedMediaType {
			status = http.StatusUnsupportedMediaType
		}
		writeError(w, status, code, err.Error())
		return
	}
	if env.ID == "" {
		env.ID = events.NewID()
	}
	if env.Channel == "" {
		env.Channel = s.cfg.DefaultChannel
	}
	if err := env.Validate(); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_envelope", err.Error())
		return
	}
	var await func(context.Context) ([]envelope.Envelope, error)
	pctx, actx := r.Context(), r.Context()
	if wait > 0 {
		await = s.gw.Expect(env.ID)
		// The publish's retries spend the wait, but a wait shorter than
		// one publish attempt still gets that attempt: ?wait=1ms must not
		// fail a publish the stream would have taken. The replies are
		// awaited for what the publish left of the wait.
		var cancel, acancel context.CancelFunc
		actx, acancel = context.WithTimeout(actx, wait)
		defer acancel()
		pctx, cancel = context.WithTimeout(pctx, max(wait, publishAttempt))
		defer cancel()
	}
	rc, err := s.gw.Publish(pctx, env)
	if err != nil {
		if await != nil {
			_, _ = await(canceled())
		}
		s.log.Error("ingress.publish_failed", "id", env.ID, "err", err)
		// The id, which the server may have made, is what a retry posts
		// again: the message may have been stored after all.
		status, code := http.StatusServiceUnavailable, "publish_failed"
		switch {
		case errors.Is(err, ErrUnavailable):
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
			code = "jetstream_unavailable"
		case errors.Is(err, nats.ErrMaxPayload):
			status, code = http.StatusRequestEntityTooLarge, "payload_too_large"
		}
		writeJSON(w, status, errorBody{Error: err.Error(), Code: code, ID: env.ID})
		return
	}
	if rc.Duplicate {
		if await != nil {
			_, _ = await(canceled()) // a retry's replies come from the done marker
		}
		s.answerRetry(actx, w, rc, wait > 0)
		return
	}
	if await == nil {
		writeJSON(w, http.StatusAccepted, reply{Receipt: rc})
		return
	}
	outs, err := await(actx)
	if err != nil {
		writeJSON(w, http.StatusAccepted, reply{Receipt: rc, Outbounds: outs, Pending: true})
		return
	}
	writeJSON(w, http.StatusOK, reply{Receipt: rc, Outbounds: outs})
}

// RetryAfterSeconds is the Retry-After of a 503 jetstream_unavailable:
// about the time a replicated stream takes to elect a new leader.
const RetryAfterSeconds = 2

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func (s *Server) parseWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("wait %q is not a duration such as 30s", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("wait %q must be positive", v)
	}
	return min(d, s.cfg.MaxWait), nil
}

// DecodeRequest turns an HTTP request body into an inbound envelope. It
// accepts Bub's JSON envelope and a CloudEvent of type
// dev.bub.envelope.inbound.v1 in binary (ce-* headers) or structured
// (application/cloudevents+json) mode. On failure it returns a short error
// code and an error naming the problem.
func DecodeRequest(header http.Header, body []byte) (*envelope.Envelope, string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, "empty_body", errors.New("request body is empty")
	}
	ct := header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct) // lower case; "" when ct is not one
	data := body
	if header.Get("Ce-Specversion") != "" || mt == events.ContentTypeStructured {
		ev, err := events.Decode(header, body)
		if err != nil {
			return nil, "invalid_cloudevent", err
		}
		if ev.Type() != events.TypeEnvelopeInbound {
			return nil, "unknown_event_type", fmt.Errorf("CloudEvent type %q is not accepted; send %s", ev.Type(), events.TypeEnvelopeInbound)
		}
		data = ev.Data()
		env, code, err := decodeEnvelope(data)
		if err != nil {
			return nil, code, err
		}
		if env.ID == "" {
			env.ID = ev.ID()
		}
		return env, "", nil
	}
	if ct != "" && mt != "application/json" {
		return nil, codeUnsupportedMediaType, fmt.Errorf("content type %q is not accepted; send application/json or a CloudEvent", ct)
	}
	return decodeEnvelope(data)
}

func decodeEnvelope(data []byte) (*envelope.Envelope, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var env envelope.Envelope
	if err := dec.Decode(&env); err != nil {
		return nil, "invalid_json", fmt.Errorf("decoding envelope JSON: %w", err)
	}
	if dec.More() {
		return nil, "invalid_json", errors.New("decoding envelope JSON: trailing data after the object")
	}
	if env.Content == "" && len(env.Media) == 0 {
		return nil, "missing_content", errors.New("envelope needs a non-empty \"content\"")
	}
	return &env, "", nil
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// ID is the message's id on a failed publish (a retry posts it again).
	ID string `json:"id,omitempty"`
}

// readBody reads r's body up to the configured limit, or answers 413
// when it is longer and 400 when it cannot be read.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBodyBytes))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "unreadable_body", err.Error())
		return nil, false
	}
	return body, true
}

// codeUnsupportedMediaType is the error code of a body that is neither
// JSON nor a CloudEvent (HTTP 415).
const codeUnsupportedMediaType = "unsupported_media_type"

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
