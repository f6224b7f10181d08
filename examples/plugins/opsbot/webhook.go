package opsbot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/bubbus/bub/pkg/channels"
	"github.com/bubbus/bub/pkg/envelope"
	"github.com/bubbus/bub/pkg/hooks"
)

// WebhookName is the webhook channel's name.
const WebhookName = "webhook"

// maxBody bounds an inbound webhook body.
const maxBody = 1 << 20

// WebhookMessage is the body of an inbound POST /message and of an
// outbound POST to the callback.
type WebhookMessage struct {
	// ID is the message id: optional inbound (a retry with the same id is
	// processed once), the outbound envelope id on replies.
	ID     string `json:"id,omitempty"`
	ChatID string `json:"chat_id"`
	Text   string `json:"text"`
	// InReplyTo is the id of the inbound message a reply answers.
	InReplyTo string `json:"in_reply_to,omitempty"`
}

// webhook is the channel: POST /message on addr hands a message to Bub,
// replies are POSTed to callback.
type webhook struct {
	addr, callback string
	handler        hooks.MessageHandler
	client         *http.Client

	mu  sync.Mutex
	srv *http.Server
	// done is closed when the server stopped serving.
	done chan struct{}
}

var (
	_ channels.Channel = (*webhook)(nil)
	_ channels.Sender  = (*webhook)(nil)
)

func newWebhook(addr, callback string, handler hooks.MessageHandler) *webhook {
	return &webhook{addr: addr, callback: callback, handler: handler, client: &http.Client{Timeout: 10 * time.Second}}
}

func (w *webhook) Name() string { return WebhookName }

// Start listens on the configured address and serves until Stop.
func (w *webhook) Start(context.Context) error {
	ln, err := net.Listen("tcp", w.addr)
	if err != nil {
		return fmt.Errorf("webhook channel: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /message", w.receive)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	w.mu.Lock()
	w.srv, w.done = srv, done
	w.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	return nil
}

// Stop shuts the server down, letting requests in flight finish within
// ctx.
func (w *webhook) Stop(ctx context.Context) error {
	w.mu.Lock()
	srv, done := w.srv, w.done
	w.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	<-done
	return err
}

func (w *webhook) receive(rw http.ResponseWriter, r *http.Request) {
	var m WebhookMessage
	dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		http.Error(rw, "invalid message: "+err.Error(), http.StatusBadRequest)
		return
	}
	if strings.TrimSpace(m.ChatID) == "" || strings.TrimSpace(m.Text) == "" {
		http.Error(rw, "invalid message: chat_id and text are required", http.StatusBadRequest)
		return
	}
	if m.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		m.ID = id.String()
	}
	env := &envelope.Envelope{
		ID: m.ID, Channel: WebhookName, ChatID: m.ChatID, Content: m.Text,
		OutputChannel: WebhookName, IsActive: true,
	}
	if err := w.handler(r.Context(), env); err != nil {
		http.Error(rw, "not accepted: "+err.Error(), http.StatusBadGateway)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(rw).Encode(map[string]string{"id": m.ID})
}

// Send POSTs the reply to the callback URL.
func (w *webhook) Send(ctx context.Context, msg *envelope.Envelope) error {
	if w.callback == "" {
		return errors.New("webhook channel: no callback URL (OPSBOT_WEBHOOK_CALLBACK)")
	}
	body, err := json.Marshal(WebhookMessage{ID: msg.ID, ChatID: msg.ChatID, Text: msg.Content, InReplyTo: msg.InReplyTo})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.callback, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook channel: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook channel: delivering %s: %w", msg.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook channel: delivering %s: callback answered %s", msg.ID, resp.Status)
	}
	return nil
}
